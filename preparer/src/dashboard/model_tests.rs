use super::*;
use crate::dashboard::ListWindow;

fn row(id: &str, parent: &str, template: &str, site: &str, prepared: bool) -> DeploymentRow {
    DeploymentRow {
        id: id.to_owned(),
        parent_id: parent.to_owned(),
        template_id: template.to_owned(),
        site_id: site.to_owned(),
        prepared,
        ..DeploymentRow::default()
    }
}

fn board(rows: Vec<DeploymentRow>) -> Board {
    let mut board = Board::default();
    board.apply(Update::Deployments(rows));
    board
}

#[test]
fn rows_are_shown_sorted_by_id_whatever_the_order_they_arrive_in() {
    let board = board(vec![
        row("c", "", "t", "", false),
        row("a", "", "t", "", false),
        row("b", "", "t", "", false),
    ]);
    assert_eq!(board.visible(), ["a", "b", "c"]);
}

#[test]
fn a_change_that_leaves_the_filter_hides_the_row_and_one_that_enters_shows_it() {
    let mut board = board(vec![
        row("a", "", "t", "", false),
        row("b", "", "t", "", false),
    ]);
    board.set_filter(DeploymentFilter::parse("prepared=no").expect("filter"));
    assert_eq!(board.visible(), ["a", "b"]);
    board.apply(Update::Deployments(vec![row("a", "", "t", "", true)]));
    assert_eq!(board.visible(), ["b"]);
    assert_eq!(board.prepared_count(), 1);
    board.apply(Update::Deployments(vec![row("a", "", "t", "", false)]));
    assert_eq!(board.visible(), ["a", "b"]);
    assert_eq!(board.prepared_count(), 0);
}

#[test]
fn children_are_indexed_by_parent_and_forgotten_on_delete() {
    let mut board = board(vec![
        row("p", "", "placement", "", false),
        row("p1", "p", "cu", "edge-1", false),
        row("p2", "p", "cu", "edge-2", true),
    ]);
    let children: Vec<&str> = board.children("p").map(|c| c.id.as_str()).collect();
    assert_eq!(children, ["p1", "p2"]);
    board.apply(Update::DeploymentDeleted("p1".to_owned()));
    assert_eq!(board.child_count("p"), 1);
    assert_eq!(board.visible(), ["p", "p2"]);
    assert_eq!(board.deployment_count(), 2);
    assert_eq!(board.prepared_count(), 1);
}

#[test]
fn a_relisting_drops_what_was_deleted_while_the_feed_was_away() {
    let mut board = board(vec![
        row("a", "", "t", "", false),
        row("b", "", "t", "", false),
    ]);
    board.apply(Update::Catalog(
        CatalogKind::Sites,
        vec![CatalogEntry {
            id: "gone".to_owned(),
            summary: String::new(),
        }],
    ));
    board.apply(Update::Relisting);
    // Still shown while the new listing arrives.
    assert_eq!(board.visible(), ["a", "b"]);
    board.apply(Update::Deployments(vec![row("b", "", "t", "", true)]));
    board.apply(Update::Listed);
    assert_eq!(board.visible(), ["b"]);
    assert!(board.catalog(CatalogKind::Sites).is_empty());
}

#[test]
fn a_put_without_a_change_in_parent_keeps_one_child_entry() {
    let mut board = board(vec![row("c", "p", "t", "", false)]);
    board.apply(Update::Deployments(vec![row("c", "p", "t", "", true)]));
    assert_eq!(board.child_count("p"), 1);
}

#[test]
fn filters_by_template_site_parent_state_metadata_and_text() {
    let mut tagged = row("x-1", "p", "cu-cp", "edge/berlin", true);
    tagged.approved = true;
    tagged
        .metadata
        .insert("region".to_owned(), "eu-west".to_owned());
    let plain = row("y-2", "", "cu-up", "regional/paris", false);
    let cases = [
        ("template=cu-*", true, true),
        ("template=cu-cp", true, false),
        ("site=edge/*", true, false),
        ("site=*/paris", false, true),
        ("parent=p", true, false),
        ("prepared=yes", true, false),
        ("prepared=no approved=no", false, true),
        ("approved=yes", true, false),
        ("region=eu-*", true, false),
        ("meta.region=eu-west", true, false),
        ("paris", false, true),
        ("x-1 berlin", true, false),
        ("", true, true),
    ];
    for (line, first, second) in cases {
        let filter = DeploymentFilter::parse(line).expect("filter");
        assert_eq!(filter.matches(&tagged), first, "{line} on the tagged row");
        assert_eq!(filter.matches(&plain), second, "{line} on the plain row");
        // The line form reads back to the same filter.
        let again = DeploymentFilter::parse(&filter.to_string()).expect("again");
        assert_eq!(again.to_string(), filter.to_string());
    }
}

#[test]
fn a_bad_filter_term_is_refused_naming_it() {
    let err = DeploymentFilter::parse("prepared=maybe").expect_err("refused");
    assert_eq!(
        err.to_string(),
        "prepared=\"maybe\": expected yes, no or any"
    );
    let err = DeploymentFilter::parse("template=a***").expect_err("refused");
    assert!(
        err.to_string().starts_with("template pattern \"a***\""),
        "{err}"
    );
}

#[test]
fn the_window_follows_the_selection_and_stays_within_the_list() {
    let mut window = ListWindow::default();
    assert_eq!(window.fit(100_000, 10), 0..10);
    window.step(15, 100_000);
    assert_eq!(window.fit(100_000, 10), 6..16);
    window.end(100_000);
    assert_eq!(window.fit(100_000, 10), 99_990..100_000);
    // The list shrinks under the selection (a filter, deletions).
    assert_eq!(window.fit(5, 10), 0..5);
    assert_eq!(window.selected(), 4);
    window.step(-100, 5);
    assert_eq!(window.selected(), 0);
    assert_eq!(window.fit(0, 10), 0..0);
}

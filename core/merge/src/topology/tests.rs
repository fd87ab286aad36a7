use nephrite_krm::Package;

use super::*;

const PACKAGE: &str = "apiVersion: topology.nephio.org/v1alpha1
kind: Placement
metadata: {name: core}
spec:
  templates:
  - template: gateway
    sites: [metro]
  - template: controller
    sites: [hq]
    merge:
    - {apiVersion: example.org/v1, kind: Tuning, name: controller-tuning}
---
apiVersion: topology.nephio.org/v1alpha1
kind: Template
metadata: {name: gateway}
spec: {templateId: 'nf/gateway:v2'}
---
apiVersion: topology.nephio.org/v1alpha1
kind: Template
metadata: {name: controller}
spec: {select: {metadata: {NF.type: 'ctl*'}}}
---
apiVersion: topology.nephio.org/v1alpha1
kind: Sites
metadata: {name: metro}
spec: {select: {metadata: {Site.region: metro}}}
---
apiVersion: topology.nephio.org/v1alpha1
kind: Site
metadata: {name: hq}
spec: {siteId: dc/hq-1}
---
apiVersion: example.org/v1
kind: Tuning
metadata:
  name: controller-tuning
  annotations: {nephio.org/rename: tuning, nephio.org/merge: Override}
spec: {workers: 8}
";

#[test]
fn reads_placement_and_choices() {
    let package = Package::from_yaml(PACKAGE).unwrap();
    let placement = find_named(&package, &["Placement"], "core", "placement").unwrap();
    let spec: PlacementSpec = read_spec(placement).unwrap();
    assert_eq!(spec.templates.len(), 2);
    assert_eq!(spec.templates[1].merge[0].name, "controller-tuning");

    let gateway = find_named(&package, &["Template"], "gateway", "template").unwrap();
    assert_eq!(
        template_choice(gateway).unwrap(),
        Choice::Id("nf/gateway:v2".into())
    );
    let controller = find_named(&package, &["Template"], "controller", "template").unwrap();
    assert!(matches!(
        template_choice(controller).unwrap(),
        Choice::Select(_)
    ));

    let hq = find_named(&package, &["Site", "Sites"], "hq", "site").unwrap();
    assert_eq!(site_choice(hq).unwrap(), Choice::Id("dc/hq-1".into()));
    let metro = find_named(&package, &["Site", "Sites"], "metro", "site").unwrap();
    assert_eq!(metro.kind, "Sites");
    let selector = sites_selector(metro).unwrap();
    let metadata = [("Site.region".to_owned(), "metro".to_owned())].into();
    assert!(selector.matches(&metadata));
}

#[test]
fn missing_names_are_reported() {
    let package = Package::from_yaml(PACKAGE).unwrap();
    let err = find_named(&package, &["Site", "Sites"], "nowhere", "site").unwrap_err();
    assert_eq!(err.to_string(), "site not found: nowhere");
    let err = merge_package_for(
        &package,
        &[MergeRef {
            api_version: "example.org/v1".into(),
            kind: "Tuning".into(),
            name: "nope".into(),
        }],
    )
    .unwrap_err();
    assert!(err.to_string().contains("merge resource not found"));
}

#[test]
fn merge_package_holds_referenced_resources() {
    let package = Package::from_yaml(PACKAGE).unwrap();
    let spec: PlacementSpec = read_spec(&package.objects()[0]).unwrap();
    let merge = merge_package_for(&package, &spec.templates[1].merge).unwrap();
    assert_eq!(merge.len(), 1);
    assert_eq!(merge.objects()[0].name(), Some("controller-tuning"));
}

#[test]
fn bad_specs() {
    let package = Package::from_yaml(
        "apiVersion: topology.nephio.org/v1alpha1\nkind: Template\nmetadata: {name: t}\nspec: {templateId: 'has space'}\n---\napiVersion: topology.nephio.org/v1alpha1\nkind: Site\nmetadata: {name: s}\nspec: {}\n---\napiVersion: topology.nephio.org/v1alpha1\nkind: Placement\nmetadata: {name: p}\nspec: {templates: 3}\n",
    )
    .unwrap();
    assert!(matches!(
        template_choice(&package.objects()[0]),
        Err(TopologyError::BadId { .. })
    ));
    assert!(matches!(
        site_choice(&package.objects()[1]),
        Err(TopologyError::NoChoice { .. })
    ));
    assert!(matches!(
        read_spec::<PlacementSpec>(&package.objects()[2]),
        Err(TopologyError::BadSpec { .. })
    ));
    assert!(is_built_in(&topology_gvk("Sites")));
    assert!(!is_built_in(&topology_gvk("Other")));
}

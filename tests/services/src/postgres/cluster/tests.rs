use std::fs;

use super::*;

fn cluster_like(dir: &Path, mode: u32) -> PathBuf {
    let data = dir.join("data");
    fs::create_dir_all(data.join("global")).expect("mkdir");
    fs::write(data.join("PG_VERSION"), "15\n").expect("write");
    fs::write(data.join("global").join("pg_control"), [0u8; 8]).expect("write");
    fs::set_permissions(&data, fs::Permissions::from_mode(mode)).expect("chmod");
    data
}

fn my_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

#[test]
fn a_complete_private_cluster_of_the_account_is_usable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = cluster_like(dir.path(), 0o700);
    assert!(usable(&data, my_uid()));
    assert!(
        !usable(&data, my_uid() + 1),
        "another account's template is not used"
    );
}

#[test]
fn a_template_others_can_read_or_that_is_incomplete_or_a_symlink_is_not_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = cluster_like(dir.path(), 0o750);
    assert!(!usable(&data, my_uid()));

    fs::set_permissions(&data, fs::Permissions::from_mode(0o700)).expect("chmod");
    fs::remove_file(data.join("global").join("pg_control")).expect("rm");
    assert!(!usable(&data, my_uid()));

    let other = tempfile::tempdir().expect("tempdir");
    let real = cluster_like(other.path(), 0o700);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    assert!(!usable(&link, my_uid()));
}

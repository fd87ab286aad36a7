use super::*;

const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                      postgres-old:x:7:7::/:/bin/false\n\
                      postgres:x:101:104:PostgreSQL administrator,,,:/var/lib/postgresql:/bin/bash\n\
                      broken:x:notanumber:1::/:/bin/false\n";

#[test]
fn an_account_is_found_by_exact_name() {
    assert_eq!(
        account_in_passwd(PASSWD, "postgres"),
        Some(Account { uid: 101, gid: 104 })
    );
    assert_eq!(
        account_in_passwd(PASSWD, "root"),
        Some(Account { uid: 0, gid: 0 })
    );
    assert_eq!(account_in_passwd(PASSWD, "postgre"), None);
    assert_eq!(account_in_passwd(PASSWD, "nobody"), None);
}

#[test]
fn a_malformed_line_is_not_an_account() {
    assert_eq!(account_in_passwd(PASSWD, "broken"), None);
    assert_eq!(account_in_passwd("postgres:x", "postgres"), None);
}

#[test]
fn require_root_agrees_with_the_effective_uid() {
    match require_root("testing the check") {
        Ok(()) => assert!(running_as_root()),
        Err(e) => {
            assert!(!running_as_root());
            assert!(e.to_string().contains("testing the check"), "{e}");
        }
    }
}

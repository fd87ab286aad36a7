//! Unit tests of the FIB entry reference counts.

use super::*;

#[test]
fn a_kernel_entry_lives_from_its_first_holder_to_its_last() {
    let mut refs = BTreeMap::new();
    assert!(take(&mut refs, "k"), "first holder creates");
    assert!(!take(&mut refs, "k"));
    assert!(!drop_ref(&mut refs, "k"));
    assert!(drop_ref(&mut refs, "k"), "last holder removes");
    assert!(refs.is_empty());
    assert!(
        drop_ref(&mut refs, "never held"),
        "an unknown entry is removed"
    );
}

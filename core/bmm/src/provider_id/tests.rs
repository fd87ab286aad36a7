use proptest::prelude::*;

use super::*;

#[test]
fn writes_the_canonical_form() {
    let id = ProviderId::new("site-1", "inst-9");
    assert_eq!(id.to_string(), "nvidia-bmm://site-1/inst-9");
}

#[test]
fn reads_every_spelling_of_the_table() {
    let want = ProviderId::new("s", "i");
    for input in [
        "nvidia-bmm://s/i",
        "nvidia-bmm:///s/i",
        "nvidia-bmm://s/i/",
        "NVIDIA-BMM://s/i",
        "nvidiabmm://s/i",
        "nvidia-carbide://s/i",
        "  nvidia-bmm://s/i\n",
    ] {
        assert_eq!(input.parse::<ProviderId>(), Ok(want.clone()), "{input:?}");
    }
}

#[test]
fn refuses_other_shapes_naming_the_input() {
    assert_eq!(
        "aws:///us-east-1a/i-1".parse::<ProviderId>(),
        Err(ProviderIdError::Scheme("aws:///us-east-1a/i-1".into()))
    );
    assert_eq!(
        "s/i".parse::<ProviderId>(),
        Err(ProviderIdError::Scheme("s/i".into()))
    );
    for bad in [
        "nvidia-bmm://s",
        "nvidia-bmm://s/i/x",
        "nvidia-bmm:///i",
        "nvidia-bmm://s//i",
        "nvidia-bmm://s/i d",
    ] {
        assert_eq!(
            bad.parse::<ProviderId>(),
            Err(ProviderIdError::Shape(bad.into())),
            "{bad:?}"
        );
    }
}

proptest! {
    #[test]
    fn display_then_parse_round_trips(site in "[a-z0-9-]{1,36}", instance in "[a-f0-9-]{1,36}") {
        let id = ProviderId::new(site, instance);
        prop_assert_eq!(id.to_string().parse::<ProviderId>(), Ok(id));
    }
}

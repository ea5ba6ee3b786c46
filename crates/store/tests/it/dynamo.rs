//! The store contract against DynamoDB on moto, through the real SDK, plus what only
//! the DynamoDB store has (the table itself).

use crate::contract;

use sortie_store::DynamoStore;

async fn store() -> DynamoStore {
    let config = sortie_testkit::sdk_config().await;
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&config),
        sortie_testkit::unique("sortie"),
    );
    store.ensure_table().await.expect("table");
    store
}

// The AWS tier: each contract test returns at once without moto (`require_aws!`).
contract::contract_suite!({
    sortie_testkit::require_aws!();
    store().await
});

#[tokio::test]
async fn ensure_table_is_idempotent() {
    sortie_testkit::require_aws!();
    let s = store().await;
    s.ensure_table()
        .await
        .expect("a second call finds the table");
}

/// The listings under a group page to the end: the contract, read two items a page.
#[tokio::test]
async fn environments_under_a_group_page_to_the_end_two_items_a_page() {
    sortie_testkit::require_aws!();
    let s = store().await.with_page_size(2);
    contract::environments_under_a_group_are_its_own_and_its_descendants_by_path(
        std::sync::Arc::new(s),
    )
    .await;
}

/// An environment item written before gsi4 existed is not in the organisation's listing
/// until its next update writes its gsi4 keys (the backfill of an existing deployment).
#[tokio::test]
async fn environments_written_before_gsi4_are_listed_after_their_next_update() {
    sortie_testkit::require_aws!();
    use aws_sdk_dynamodb::types::AttributeValue;
    use sortie_core::{EnvPath, GroupPath};
    use sortie_store::EnvironmentStore;

    let s = store().await;
    contract::setup_env(&s, "acme/web/prod").await;
    let client = aws_sdk_dynamodb::Client::new(&sortie_testkit::sdk_config().await);
    client
        .update_item()
        .table_name(s.table())
        .key("pk", AttributeValue::S("ENV#acme/web/prod".into()))
        .key("sk", AttributeValue::S("ENV".into()))
        .update_expression("REMOVE gsi4pk, gsi4sk")
        .send()
        .await
        .expect("an item as written before gsi4");
    let acme = GroupPath::parse("acme").unwrap();
    let listed = |s: &DynamoStore| {
        let s = s.clone();
        let acme = acme.clone();
        async move {
            let under = s.list_environments_under(&acme, 100).await.unwrap();
            let count = s.count_environments_under(&acme).await.unwrap();
            (under.environments.len(), count)
        }
    };
    assert_eq!(listed(&s).await, (0, 0), "not yet in gsi4");
    let path = EnvPath::parse("acme/web/prod").unwrap();
    let env = s.get_environment(&path).await.unwrap().item.environment;
    s.update_environment(&env, None).await.unwrap();
    assert_eq!(listed(&s).await, (1, 1), "the update wrote its gsi4 keys");
}

//! The store contract against DynamoDB on moto, through the real SDK, plus what only
//! the DynamoDB store has (the table itself).

mod contract;

use sortie_store::DynamoStore;

async fn store() -> DynamoStore {
    let config = sortie_tests::sdk_config().await;
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&config),
        sortie_tests::unique("sortie"),
    );
    store.ensure_table().await.expect("table");
    store
}

contract::contract_suite!(store().await);

#[tokio::test]
async fn ensure_table_is_idempotent() {
    let s = store().await;
    s.ensure_table()
        .await
        .expect("a second call finds the table");
}

//! Creating the table: keys, four GSIs and TTL.

use super::DynamoStore;
use crate::error::aws;
use crate::StoreError;

impl DynamoStore {
    /// Creates the table with its keys, four GSIs (gsi1..gsi4) and TTL, if it does not exist yet.
    /// Used by local mode and tests; in AWS the SAM template creates it.
    pub async fn ensure_table(&self) -> Result<(), StoreError> {
        use aws_sdk_dynamodb::types::{
            AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
            Projection, ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
        };
        if self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .is_ok()
        {
            return Ok(());
        }
        let attr = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("name and type are set")
        };
        let key_el = |name: &str, kt: KeyType| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kt)
                .build()
                .expect("name and type are set")
        };
        let mut req = self
            .client
            .create_table()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("pk"))
            .attribute_definitions(attr("sk"))
            .key_schema(key_el("pk", KeyType::Hash))
            .key_schema(key_el("sk", KeyType::Range));
        for i in 1..=4 {
            let (pk, sk) = (format!("gsi{i}pk"), format!("gsi{i}sk"));
            req = req
                .attribute_definitions(attr(&pk))
                .attribute_definitions(attr(&sk))
                .global_secondary_indexes(
                    GlobalSecondaryIndex::builder()
                        .index_name(format!("gsi{i}"))
                        .key_schema(key_el(&pk, KeyType::Hash))
                        .key_schema(key_el(&sk, KeyType::Range))
                        .projection(
                            Projection::builder()
                                .projection_type(ProjectionType::All)
                                .build(),
                        )
                        .build()
                        .expect("index name and keys are set"),
                );
        }
        match req.send().await {
            Ok(_) => {}
            Err(e)
                if e.as_service_error()
                    .is_some_and(|se| se.is_resource_in_use_exception()) =>
            {
                return Ok(())
            }
            Err(e) => return Err(aws("dynamodb", e)),
        }
        self.client
            .update_time_to_live()
            .table_name(&self.table)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name("expires_at")
                    .enabled(true)
                    .build()
                    .expect("name and flag are set"),
            )
            .send()
            .await
            .map_err(|e| aws("dynamodb", e))?;
        Ok(())
    }
}

//! The KMS key that signs `sortie dev`'s job identity tokens, made on the local AWS.

use anyhow::Context;

/// The KMS alias whose key signs `sortie dev`'s job identity tokens by default (made at
/// the first start on the local AWS).
pub const DEV_IDENTITY_KEY: &str = "alias/sortie-dev-identity";

/// Makes a signing key behind `alias` on the local AWS's KMS, unless the alias names one
/// already (or another `sortie dev` names it first).
pub(super) async fn ensure_identity_key(
    config: &aws_config::SdkConfig,
    alias: &str,
) -> anyhow::Result<()> {
    use aws_sdk_kms::error::ProvideErrorMetadata as _;
    let kms = aws_sdk_kms::Client::new(config);
    if kms.get_public_key().key_id(alias).send().await.is_ok() {
        return Ok(());
    }
    let key = kms
        .create_key()
        .key_spec(aws_sdk_kms::types::KeySpec::EccNistP256)
        .key_usage(aws_sdk_kms::types::KeyUsageType::SignVerify)
        .description("sortie dev: job identity tokens")
        .send()
        .await
        .context("creating the identity signing key in KMS")?;
    let id = key
        .key_metadata()
        .map(|m| m.key_id().to_string())
        .unwrap_or_default();
    match kms
        .create_alias()
        .alias_name(alias)
        .target_key_id(id)
        .send()
        .await
    {
        Ok(_) => Ok(()),
        // Another `sortie dev` on the same local AWS named its key first: that one signs.
        Err(e) if e.code() == Some("AlreadyExistsException") => Ok(()),
        Err(e) => Err(e).context("naming the identity signing key"),
    }
}

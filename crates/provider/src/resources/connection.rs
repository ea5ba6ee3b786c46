//! A code host's connection, one resource shape for every host: the API's `PUT` connects
//! (or replaces) the organisation's connection, `GET` reads it and `DELETE` disconnects
//! it. The credential and the webhook secret are sent on every create and update; the API
//! keeps them in Secrets Manager and never shows them again, so the state keeps the
//! configuration's (null after an import). Each host ([`Host`]) says its endpoints, the
//! body it sends and how the API's view becomes its state.

use std::marker::PhantomData;

use serde_json::Value;
use sortie_client::Call;

use super::{text, Resource};
use crate::api::Api;
use crate::error::Error;
use crate::model::Model;

/// What one code host's connection resource differs in.
pub trait Host: Send + Sync + 'static {
    /// Its attributes.
    type Model: Model;
    /// Its Terraform type name.
    const TYPE_NAME: &'static str;
    /// The API's calls on an organisation's connection to this host.
    const CALLS: Calls;
    /// The connect body of `planned` (its credential and webhook secret in it).
    fn body(planned: &Self::Model) -> Value;
    /// The API's `view` as state, the secrets being `secrets`' (the API never shows them).
    fn state_of(view: &Value, secrets: &Self::Model) -> Self::Model;
    /// The organisation `model` names (its `org`, or its `id` when read back).
    fn org(model: &Self::Model, from_id: bool) -> &Option<String>;
}

/// The API's calls on organisation `org`'s connection to one host.
pub struct Calls {
    /// Connect (`PUT`): create or replace it.
    pub connect: fn(&str) -> Call,
    /// Read it (`GET`).
    pub get: fn(&str) -> Call,
    /// Disconnect (`DELETE`).
    pub delete: fn(&str) -> Call,
}

/// The connection resource of host `H`.
pub struct ConnectionResource<H>(PhantomData<H>);

impl<H> ConnectionResource<H> {
    /// The resource.
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<H: Host> ConnectionResource<H> {
    /// Connects the organisation (replacing a connection it had), storing its secrets anew.
    async fn put(api: &Api, planned: &H::Model) -> Result<H::Model, Error> {
        let org = sortie_client::group(text(H::org(planned, false)));
        let answer = api
            .send(&(H::CALLS.connect)(org), Some(&H::body(planned)), None)
            .await?;
        Ok(H::state_of(&answer.body, planned))
    }
}

#[tonic::async_trait]
impl<H: Host> Resource for ConnectionResource<H> {
    type Model = H::Model;

    fn type_name(&self) -> &'static str {
        H::TYPE_NAME
    }

    async fn create(&self, api: &Api, planned: &H::Model) -> Result<H::Model, Error> {
        Self::put(api, planned).await
    }

    /// Reads it; the secrets are the state's own.
    async fn read(&self, api: &Api, state: &H::Model) -> Result<H::Model, Error> {
        let org = sortie_client::group(text(H::org(state, true)));
        let a = api.get(&(H::CALLS.get)(org)).await?;
        Ok(H::state_of(&a.body, state))
    }

    async fn update(
        &self,
        api: &Api,
        _prior: &H::Model,
        planned: &H::Model,
    ) -> Result<H::Model, Error> {
        Self::put(api, planned).await
    }

    /// Deletes it (its secrets go with it).
    async fn delete(&self, api: &Api, state: &H::Model) -> Result<(), Error> {
        let org = sortie_client::group(text(H::org(state, true)));
        api.send(&(H::CALLS.delete)(org), None, None).await?;
        Ok(())
    }
}

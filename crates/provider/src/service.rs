//! The `tfplugin6.Provider` service: decodes each request's values, applies the pure rules
//! of [`crate::schema`], calls the resource or data source, and answers with diagnostics
//! instead of gRPC errors.

use std::sync::OnceLock;

use serde_json::Value;
use tonic::{Request, Response, Status};

use crate::api::Api;
use crate::cty::{self, Val};
use crate::error::{error, Error};
use crate::proto::tfplugin6 as pb;
use crate::proto::tfplugin6::provider_server::Provider;
use crate::resources::DynResource;
use crate::schema::{attr, path, Block, Mode, Ty};

/// The provider: its API client once configured.
#[derive(Default)]
pub struct SortieProvider {
    api: OnceLock<Api>,
}

/// The provider's own configuration block.
pub fn provider_block() -> Block {
    Block {
        attrs: vec![
            attr(
                "api_url",
                Ty::String,
                Mode::Optional,
                "The Sortie API's base URL; SORTIE_API_URL when unset.",
            ),
            attr(
                "token",
                Ty::String,
                Mode::Optional,
                "The bearer token; SORTIE_TOKEN when unset.",
            )
            .sensitive(),
            attr(
                "token_command",
                Ty::String,
                Mode::Optional,
                "A command (run with `sh -c`) that prints the token, as the CLI's contexts allow.",
            ),
        ],
        blocks: vec![],
        description: "Sortie: runners, rules, environments and agent pools as code.",
    }
}

fn dv(v: &Val) -> Option<pb::DynamicValue> {
    Some(pb::DynamicValue {
        msgpack: cty::encode(v),
        json: Vec::new(),
    })
}

fn decoded(v: &Option<pb::DynamicValue>, block: &Block) -> Result<Val, Error> {
    let v = match v {
        Some(d) if !d.msgpack.is_empty() => cty::decode(&d.msgpack)?,
        Some(d) if !d.json.is_empty() => Val::from_json(
            &serde_json::from_slice(&d.json).map_err(|e| Error::Value(e.to_string()))?,
        ),
        _ => Val::Null,
    };
    Ok(block.conform(&v))
}

fn one(e: Error) -> Vec<pb::Diagnostic> {
    e.diagnostics(&|_| None)
}

/// The token a command prints (its first line, trimmed).
fn token_of_command(command: &str) -> Result<String, Error> {
    let out = std::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::Config(format!("token_command could not run: {e}")))?;
    if !out.status.success() {
        // Its stderr may print the token or another secret: only its length is told.
        return Err(Error::Config(format!(
            "token_command failed ({}); its stderr ({} bytes) is withheld, as it may hold a secret: run the command yourself to see it",
            out.status,
            out.stderr.len()
        )));
    }
    let token = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    if token.is_empty() {
        return Err(Error::Config("token_command printed no token".into()));
    }
    Ok(token)
}

/// The API client the provider configuration (or the environment) describes.
pub fn configure(config: &Val) -> Result<Api, Error> {
    let text = |name: &str| match config.get(name) {
        Val::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let url = text("api_url")
        .or_else(|| env("SORTIE_API_URL"))
        .ok_or_else(|| {
            Error::Config(
                "no Sortie API URL: set `api_url` in the provider block or SORTIE_API_URL".into(),
            )
        })?;
    // The URL is checked before any token is read: plain http:// to another host would
    // carry it in clear.
    if let Some(problem) = crate::api::cleartext_problem(&url) {
        return Err(match text("api_url") {
            Some(_) => Error::Invalid {
                attribute: "api_url".into(),
                problem,
            },
            None => Error::Config(format!("SORTIE_API_URL (api_url is unset): {problem}")),
        });
    }
    let token = match (text("token"), text("token_command")) {
        (Some(t), _) => Some(t),
        (None, Some(command)) => Some(token_of_command(&command)?),
        (None, None) => env("SORTIE_TOKEN"),
    };
    Api::new(&url, token)
}

impl SortieProvider {
    fn api(&self) -> Result<&Api, Error> {
        self.api
            .get()
            .ok_or_else(|| Error::Config("the provider was not configured".into()))
    }

    fn resource(name: &str) -> Result<&'static dyn DynResource, Status> {
        crate::resources::find(name)
            .ok_or_else(|| Status::invalid_argument(format!("unknown resource type {name}")))
    }

    async fn plan(
        &self,
        r: pb::plan_resource_change::Request,
    ) -> Result<pb::plan_resource_change::Response, Error> {
        let resource =
            Self::resource(&r.type_name).map_err(|s| Error::Value(s.message().to_string()))?;
        let block = resource.schema();
        let prior = decoded(&r.prior_state, &block)?;
        let config = decoded(&r.config, &block)?;
        if config.is_null() {
            // Destroy.
            return Ok(pb::plan_resource_change::Response {
                planned_state: dv(&Val::Null),
                ..Default::default()
            });
        }
        if !config.has_unknown() {
            resource.validate(&config.to_json())?;
        }
        let planned = block.plan(&config, &prior);
        let replace = block.requires_replace(&prior, &planned);
        let planned = if replace.is_empty() {
            planned
        } else {
            block.plan(&config, &Val::Null)
        };
        Ok(pb::plan_resource_change::Response {
            planned_state: dv(&planned),
            requires_replace: replace.into_iter().map(path).collect(),
            ..Default::default()
        })
    }

    async fn apply(&self, r: &pb::apply_resource_change::Request) -> Result<Val, Error> {
        let resource =
            Self::resource(&r.type_name).map_err(|s| Error::Value(s.message().to_string()))?;
        let block = resource.schema();
        let prior = decoded(&r.prior_state, &block)?;
        let planned = decoded(&r.planned_state, &block)?;
        let api = self.api()?;
        if planned.is_null() {
            resource.delete(api, &prior.to_json()).await?;
            return Ok(Val::Null);
        }
        let answer = if prior.is_null() {
            resource.create(api, &planned.to_json()).await?
        } else {
            resource
                .update(api, &prior.to_json(), &planned.to_json())
                .await?
        };
        Ok(block.settle(&block.conform(&Val::from_json(&answer)), &planned))
    }
}

/// A configuration error as Terraform shows it: on the attribute at fault when there is
/// one (`api_url`), else on the provider block.
fn configuration_diagnostics(e: &Error) -> Vec<pb::Diagnostic> {
    match e {
        Error::Invalid { attribute, problem } => vec![error(
            &format!("Sortie provider configuration: invalid `{attribute}`"),
            problem,
            Some(attribute),
        )],
        other => vec![error(
            "Sortie provider configuration",
            &other.to_string(),
            None,
        )],
    }
}

fn diag_of(resource: Option<&dyn DynResource>, e: &Error) -> Vec<pb::Diagnostic> {
    match resource {
        Some(r) => e.diagnostics(&|p| r.attribute_of(p)),
        None => one_ref(e),
    }
}

fn one_ref(e: &Error) -> Vec<pb::Diagnostic> {
    e.diagnostics(&|_| None)
}

#[tonic::async_trait]
impl Provider for SortieProvider {
    async fn get_provider_schema(
        &self,
        _: Request<pb::get_provider_schema::Request>,
    ) -> Result<Response<pb::get_provider_schema::Response>, Status> {
        Ok(Response::new(pb::get_provider_schema::Response {
            provider: Some(provider_block().schema()),
            resource_schemas: crate::resources::registry()
                .iter()
                .map(|r| (r.type_name().to_string(), r.schema().schema()))
                .collect(),
            data_source_schemas: crate::data::registry()
                .iter()
                .map(|d| (d.type_name().to_string(), d.schema().schema()))
                .collect(),
            server_capabilities: Some(pb::ServerCapabilities {
                plan_destroy: true,
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn validate_provider_config(
        &self,
        r: Request<pb::validate_provider_config::Request>,
    ) -> Result<Response<pb::validate_provider_config::Response>, Status> {
        let diagnostics = match decoded(&r.get_ref().config, &provider_block()) {
            Ok(_) => Vec::new(),
            Err(e) => one(e),
        };
        Ok(Response::new(pb::validate_provider_config::Response {
            diagnostics,
        }))
    }

    async fn validate_resource_config(
        &self,
        r: Request<pb::validate_resource_config::Request>,
    ) -> Result<Response<pb::validate_resource_config::Response>, Status> {
        let r = r.into_inner();
        let resource = Self::resource(&r.type_name)?;
        let diagnostics = match decoded(&r.config, &resource.schema()) {
            Ok(c) if !c.has_unknown() => resource
                .validate(&c.to_json())
                .err()
                .map(|e| diag_of(Some(resource), &e))
                .unwrap_or_default(),
            Ok(_) => Vec::new(),
            Err(e) => one(e),
        };
        Ok(Response::new(pb::validate_resource_config::Response {
            diagnostics,
        }))
    }

    async fn validate_data_resource_config(
        &self,
        _: Request<pb::validate_data_resource_config::Request>,
    ) -> Result<Response<pb::validate_data_resource_config::Response>, Status> {
        Ok(Response::new(Default::default()))
    }

    async fn upgrade_resource_state(
        &self,
        r: Request<pb::upgrade_resource_state::Request>,
    ) -> Result<Response<pb::upgrade_resource_state::Response>, Status> {
        let r = r.into_inner();
        let resource = Self::resource(&r.type_name)?;
        let json = r.raw_state.map(|s| s.json).unwrap_or_default();
        let state = match serde_json::from_slice::<Value>(&json) {
            Ok(v) => resource.schema().conform(&Val::from_json(&v)),
            Err(e) => {
                return Ok(Response::new(pb::upgrade_resource_state::Response {
                    diagnostics: one(Error::Value(format!("the stored state is not JSON: {e}"))),
                    ..Default::default()
                }))
            }
        };
        Ok(Response::new(pb::upgrade_resource_state::Response {
            upgraded_state: dv(&state),
            diagnostics: Vec::new(),
        }))
    }

    async fn configure_provider(
        &self,
        r: Request<pb::configure_provider::Request>,
    ) -> Result<Response<pb::configure_provider::Response>, Status> {
        let diagnostics =
            match decoded(&r.get_ref().config, &provider_block()).and_then(|c| configure(&c)) {
                Ok(api) => {
                    let _ = self.api.set(api);
                    Vec::new()
                }
                Err(e) => configuration_diagnostics(&e),
            };
        Ok(Response::new(pb::configure_provider::Response {
            diagnostics,
        }))
    }

    async fn read_resource(
        &self,
        r: Request<pb::read_resource::Request>,
    ) -> Result<Response<pb::read_resource::Response>, Status> {
        let r = r.into_inner();
        let resource = Self::resource(&r.type_name)?;
        let block = resource.schema();
        let read = async {
            let prior = decoded(&r.current_state, &block)?;
            let now = resource.read(self.api()?, &prior.to_json()).await?;
            Ok::<_, Error>(match now {
                // Gone: a null state plans a re-creation.
                None => Val::Null,
                Some(v) => block.settle(&block.conform(&Val::from_json(&v)), &prior),
            })
        };
        Ok(Response::new(match read.await {
            Ok(state) => pb::read_resource::Response {
                new_state: dv(&state),
                private: r.private,
                ..Default::default()
            },
            Err(e) => pb::read_resource::Response {
                new_state: r.current_state,
                diagnostics: diag_of(Some(resource), &e),
                private: r.private,
                ..Default::default()
            },
        }))
    }

    async fn plan_resource_change(
        &self,
        r: Request<pb::plan_resource_change::Request>,
    ) -> Result<Response<pb::plan_resource_change::Response>, Status> {
        let r = r.into_inner();
        let resource = crate::resources::find(&r.type_name);
        Ok(Response::new(match self.plan(r).await {
            Ok(answer) => answer,
            Err(e) => pb::plan_resource_change::Response {
                diagnostics: diag_of(resource, &e),
                ..Default::default()
            },
        }))
    }

    async fn apply_resource_change(
        &self,
        r: Request<pb::apply_resource_change::Request>,
    ) -> Result<Response<pb::apply_resource_change::Response>, Status> {
        let r = r.into_inner();
        let resource = crate::resources::find(&r.type_name);
        Ok(Response::new(match self.apply(&r).await {
            Ok(state) => pb::apply_resource_change::Response {
                new_state: dv(&state),
                ..Default::default()
            },
            Err(e) => pb::apply_resource_change::Response {
                // Nothing changed: the prior state stands.
                new_state: r.prior_state,
                diagnostics: diag_of(resource, &e),
                ..Default::default()
            },
        }))
    }

    async fn import_resource_state(
        &self,
        r: Request<pb::import_resource_state::Request>,
    ) -> Result<Response<pb::import_resource_state::Response>, Status> {
        let r = r.into_inner();
        let resource = Self::resource(&r.type_name)?;
        let block = resource.schema();
        let import = async {
            let start = resource.import_state(&r.id)?;
            let found = resource
                .read(self.api()?, &start)
                .await?
                .ok_or_else(|| Error::Api {
                    status: 404,
                    code: "not_found".into(),
                    message: format!("{} `{}` was not found", resource.type_name(), r.id),
                    fields: Vec::new(),
                })?;
            // Settled against nothing: an optional attribute the API answers empty is
            // null, as a configuration that leaves it out plans it.
            Ok::<_, Error>(block.settle(&block.conform(&Val::from_json(&found)), &Val::Null))
        };
        Ok(Response::new(match import.await {
            Ok(state) => pb::import_resource_state::Response {
                imported_resources: vec![pb::import_resource_state::ImportedResource {
                    type_name: r.type_name,
                    state: dv(&state),
                    private: Vec::new(),
                }],
                ..Default::default()
            },
            Err(e) => pb::import_resource_state::Response {
                diagnostics: diag_of(Some(resource), &e),
                ..Default::default()
            },
        }))
    }

    async fn read_data_source(
        &self,
        r: Request<pb::read_data_source::Request>,
    ) -> Result<Response<pb::read_data_source::Response>, Status> {
        let r = r.into_inner();
        let source = crate::data::find(&r.type_name).ok_or_else(|| {
            Status::invalid_argument(format!("unknown data source {}", r.type_name))
        })?;
        let block = source.schema();
        let read = async {
            let config = decoded(&r.config, &block)?;
            let v = source.read(self.api()?, &config.to_json()).await?;
            Ok::<_, Error>(block.conform(&Val::from_json(&v)))
        };
        Ok(Response::new(match read.await {
            Ok(state) => pb::read_data_source::Response {
                state: dv(&state),
                ..Default::default()
            },
            Err(e) => pb::read_data_source::Response {
                diagnostics: one_ref(&e),
                ..Default::default()
            },
        }))
    }

    async fn stop_provider(
        &self,
        _: Request<pb::stop_provider::Request>,
    ) -> Result<Response<pb::stop_provider::Response>, Status> {
        Ok(Response::new(pb::stop_provider::Response {
            error: String::new(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(v: serde_json::Value) -> Val {
        Val::from_json(&v)
    }

    /// Every text of these diagnostics, joined.
    fn shown(diagnostics: &[pb::Diagnostic]) -> String {
        diagnostics
            .iter()
            .map(|d| format!("{} {}", d.summary, d.detail))
            .collect()
    }

    #[test]
    fn a_failing_token_commands_stderr_is_withheld_from_the_diagnostics() {
        let secret = "S3cret-token-value";
        let Err(e) = configure(&config(serde_json::json!({
            "api_url": "https://api.example.com",
            "token_command": format!("echo 'oops {secret}' >&2; echo {secret}; exit 3"),
        }))) else {
            panic!("a failing token_command configures the provider");
        };
        let text = shown(&configuration_diagnostics(&e));
        assert!(!text.contains(secret), "{text}");
        assert!(text.contains("token_command failed"), "{text}");
        assert!(text.contains("exit status: 3"), "{text}");
        assert!(text.contains("withheld"), "{text}");
        assert!(
            text.contains(&format!("{} bytes", format!("oops {secret}\n").len())),
            "{text}"
        );
    }

    #[test]
    fn plain_http_to_another_host_is_refused_on_api_url_before_the_token_command_runs() {
        let marker = std::env::temp_dir().join(format!("sortie-tfp-ran-{}", std::process::id()));
        let Err(e) = configure(&config(serde_json::json!({
            "api_url": "http://api.example.com:8080",
            "token_command": format!("touch {}; echo t", marker.display()),
        }))) else {
            panic!("plain http to another host configures the provider");
        };
        assert!(!marker.exists(), "the token command ran");
        let diagnostics = configuration_diagnostics(&e);
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(
            diagnostics[0].attribute,
            Some(crate::schema::path("api_url"))
        );
        assert!(
            diagnostics[0].summary.contains("`api_url`"),
            "{:?}",
            diagnostics[0]
        );
        assert!(
            diagnostics[0].detail.contains("in clear"),
            "{:?}",
            diagnostics[0]
        );
        assert!(configure(&config(serde_json::json!({
            "api_url": "http://127.0.0.1:9",
            "token": "t",
        })))
        .is_ok());
    }
}

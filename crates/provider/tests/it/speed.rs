//! The speed figure (ignored; `scripts/provider-bench.sh` runs it): `terraform plan` with
//! refresh over 200 Sortie resources (a runner, a rule, 198 environments) against
//! `sortie dev`, wall time, best of three, with each Terraform.

use std::time::Instant;

use crate::common::{terraforms, Dev, Tf};

const CONFIG: &str = r#"
resource "sortie_runner" "local" {
  group = "bench"
  name  = "local"
  local {
    timeout_seconds = 600
  }
  state_local {
    directory = "/tmp/sortie-tfp-bench"
  }
}

resource "sortie_runner_rule" "default" {
  scope     = "bench"
  rule_id   = "default"
  runner_id = sortie_runner.local.id
}

resource "sortie_environment" "e" {
  count      = 198
  group      = "bench"
  name       = "env-${count.index}"
  env_type   = "dev"
  labels     = { n = "${count.index}" }
  depends_on = [sortie_runner_rule.default]
}
"#;

#[test]
#[ignore = "a benchmark: scripts/provider-bench.sh"]
fn plan_over_200_resources() {
    crate::require_aws!();
    for (version, bin) in terraforms() {
        let dev = Dev::start("tfp-speed");
        let tf = Tf::new(&bin, &dev, "tfp-speed");
        tf.write(CONFIG);
        let started = Instant::now();
        tf.apply();
        let apply = started.elapsed();
        let mut best = f64::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            let plan = tf.plan();
            let took = started.elapsed().as_secs_f64();
            assert_eq!(plan.code, 0, "Terraform {version}: {}", plan.out);
            assert!(plan.out.contains("Refreshing state"), "refresh ran");
            best = best.min(took);
        }
        // Terraform's own share: the same plan without refresh (no API call).
        let started = Instant::now();
        tf.ok(&["plan", "-input=false", "-no-color", "-refresh=false"]);
        let no_refresh = started.elapsed().as_secs_f64();
        println!(
            "provider-bench: terraform {version}: plan with refresh over 200 resources: {best:.2} s (best of 3); without refresh {no_refresh:.2} s; first apply {:.1} s",
            apply.as_secs_f64()
        );
        let _ = std::fs::remove_dir_all(&tf.dir);
    }
}

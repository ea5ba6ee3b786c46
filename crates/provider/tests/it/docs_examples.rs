//! Every HCL example of docs/provider/ (and of examples/two-environments) is valid with the
//! built provider: the docs pages' examples together make one configuration (the index's
//! `terraform` and `provider` blocks first), `terraform validate`d with each Terraform.
//! (examples/two-environments is applied by `two_environments::`.)

use std::path::{Path, PathBuf};

use crate::common::{terraforms, Tf};

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/provider")
}

/// The ```hcl blocks of one Markdown text.
pub fn hcl_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```hcl") || l.starts_with("```terraform") => {
                current = Some(String::new())
            }
            (Some(_), l) if l.starts_with("```") => blocks.push(current.take().unwrap()),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// The pages, index first, then the rest by path.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![docs().join("index.md")];
    for sub in ["resources", "data-sources"] {
        let mut these: Vec<PathBuf> = std::fs::read_dir(docs().join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        these.sort();
        pages.extend(these);
    }
    pages
}

#[test]
fn every_docs_page_has_an_example_and_they_validate() {
    // Terraform comes with the AWS tier (scripts/with-moto.sh); the fast tier skips.
    crate::require_aws!();
    let mut config = String::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let blocks = hcl_blocks(&text);
        assert!(
            !blocks.is_empty(),
            "{} has no ```hcl example",
            page.display()
        );
        for b in blocks {
            config.push_str(&format!("# {}\n{b}\n", page.display()));
        }
    }
    assert!(
        config.contains("required_providers"),
        "the index's example names the provider"
    );
    for (version, bin) in terraforms() {
        let tf = Tf::offline(&bin, "tfp-docs");
        std::fs::write(tf.dir.join("main.tf"), &config).unwrap();
        let r = tf.run(&["validate", "-no-color"]);
        assert_eq!(
            r.code, 0,
            "Terraform {version}: the docs' examples do not validate:\n{}\n--- config ---\n{config}",
            r.all()
        );
        let _ = std::fs::remove_dir_all(&tf.dir);
    }
}

#[test]
fn hcl_blocks_are_found() {
    let md = "# t\n```hcl\na = 1\n```\ntext\n```sh\nx\n```\n```hcl\nb = 2\n```\n";
    assert_eq!(
        hcl_blocks(md),
        vec!["a = 1\n".to_string(), "b = 2\n".to_string()]
    );
}

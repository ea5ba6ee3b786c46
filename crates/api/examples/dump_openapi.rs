//! Throwaway (S2): prints the served OpenAPI document.
fn main() {
    println!("{}", serde_json::to_string_pretty(&sortie_api::openapi()).unwrap());
}

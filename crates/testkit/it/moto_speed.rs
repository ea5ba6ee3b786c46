//! The project's moto is faster than stock moto in three places (patches 12 to 14 of
//! `scripts/moto_server.py`), and none of them may change an answer:
//!
//! - patch 12 writes DynamoDB attribute values out directly: every kind of value (binary
//!   and sets included, empty and nested) comes back from GetItem, Query and UpdateItem
//!   exactly as it was written;
//! - patch 13 parses an update expression once per text: the same text run on different
//!   items with different values gives each item its own result;
//! - patch 14 keeps a client's connection open: request after request is answered on one
//!   connection, whatever the body before it (unread, chunked), and a client that cannot
//!   keep it (HTTP/1.0) is still told `Connection: close`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;
use sortie_testkit::{require_aws, unique};

/// A fresh table of the store's own shape (`pk`, `sk`, its indexes).
async fn table(ddb: &Client) -> String {
    let name = unique("sortie-moto-speed");
    sortie_store::DynamoStore::new(ddb.clone(), &name)
        .ensure_table()
        .await
        .unwrap();
    name
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

/// An item with every kind of attribute value, empty ones and nesting.
fn every_kind(sk: &str) -> HashMap<String, AttributeValue> {
    let nested = AttributeValue::M(HashMap::from([
        (
            "list".to_string(),
            AttributeValue::L(vec![
                AttributeValue::N("1".into()),
                AttributeValue::M(HashMap::new()),
                AttributeValue::L(vec![]),
                AttributeValue::B(Blob::new(vec![0u8, 255, 10])),
                AttributeValue::Null(true),
            ]),
        ),
        ("set".to_string(), AttributeValue::Ss(vec!["q".into()])),
        ("quote".to_string(), s("\"\\\u{2028}é")),
    ]));
    HashMap::from([
        ("pk".to_string(), s("p")),
        ("sk".to_string(), s(sk)),
        ("text".to_string(), s("x")),
        ("empty".to_string(), s("")),
        ("number".to_string(), AttributeValue::N("-1.5E3".into())),
        ("yes".to_string(), AttributeValue::Bool(true)),
        ("no".to_string(), AttributeValue::Bool(false)),
        ("null".to_string(), AttributeValue::Null(true)),
        (
            "strings".to_string(),
            AttributeValue::Ss(vec!["a".into(), "b".into()]),
        ),
        (
            "numbers".to_string(),
            AttributeValue::Ns(vec!["1".into(), "2".into()]),
        ),
        (
            "bytes".to_string(),
            AttributeValue::B(Blob::new(vec![0u8, 1, 2, 254, 255])),
        ),
        (
            "no_bytes".to_string(),
            AttributeValue::B(Blob::new(Vec::<u8>::new())),
        ),
        (
            "byte_sets".to_string(),
            AttributeValue::Bs(vec![Blob::new(b"x".to_vec()), Blob::new(vec![1u8])]),
        ),
        ("empty_map".to_string(), AttributeValue::M(HashMap::new())),
        ("empty_list".to_string(), AttributeValue::L(vec![])),
        ("nested".to_string(), nested),
    ])
}

/// Sets compare as sets: DynamoDB keeps no order in them.
fn normal(mut item: HashMap<String, AttributeValue>) -> HashMap<String, AttributeValue> {
    fn one(v: AttributeValue) -> AttributeValue {
        match v {
            AttributeValue::Ss(mut v) => {
                v.sort();
                AttributeValue::Ss(v)
            }
            AttributeValue::Ns(mut v) => {
                v.sort();
                AttributeValue::Ns(v)
            }
            AttributeValue::Bs(mut v) => {
                v.sort_by(|a, b| a.as_ref().cmp(b.as_ref()));
                AttributeValue::Bs(v)
            }
            AttributeValue::M(m) => {
                AttributeValue::M(m.into_iter().map(|(k, v)| (k, one(v))).collect())
            }
            AttributeValue::L(l) => AttributeValue::L(l.into_iter().map(one).collect()),
            other => other,
        }
    }
    for v in item.values_mut() {
        *v = one(std::mem::replace(v, AttributeValue::Null(true)));
    }
    item
}

#[tokio::test]
async fn every_kind_of_attribute_value_comes_back_as_it_was_written() {
    let aws = require_aws!();
    let ddb = Client::new(&aws.sdk_config().await);
    let table = table(&ddb).await;
    let written = every_kind("a");
    ddb.put_item()
        .table_name(&table)
        .set_item(Some(written.clone()))
        .send()
        .await
        .unwrap();

    let got = ddb
        .get_item()
        .table_name(&table)
        .key("pk", s("p"))
        .key("sk", s("a"))
        .send()
        .await
        .unwrap()
        .item
        .expect("the item");
    assert_eq!(normal(got), normal(written.clone()), "GetItem");

    let queried = ddb
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :p")
        .expression_attribute_values(":p", s("p"))
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    assert_eq!(queried.len(), 1);
    assert_eq!(normal(queried[0].clone()), normal(written.clone()), "Query");

    let updated = ddb
        .update_item()
        .table_name(&table)
        .key("pk", s("p"))
        .key("sk", s("a"))
        .update_expression("SET #t = :t")
        .expression_attribute_names("#t", "text")
        .expression_attribute_values(":t", s("y"))
        .return_values(ReturnValue::AllNew)
        .send()
        .await
        .unwrap()
        .attributes
        .expect("ALL_NEW");
    let mut expected = written;
    expected.insert("text".into(), s("y"));
    assert_eq!(normal(updated), normal(expected), "UpdateItem ALL_NEW");
}

#[tokio::test]
async fn one_update_expression_text_gives_each_item_its_own_result() {
    let aws = require_aws!();
    let ddb = Client::new(&aws.sdk_config().await);
    let table = table(&ddb).await;
    // The same text every time, as a claim's is: a kept tree must carry no value, name or
    // item of an earlier run into a later one.
    let expression = "SET #v = :v, history = list_append(if_not_exists(history, :empty), :h), \
                      n = if_not_exists(n, :zero) + :one REMOVE gone";
    for round in 0..3 {
        for item in ["a", "b", "c"] {
            let value = format!("{item}-{round}");
            let attrs = ddb
                .update_item()
                .table_name(&table)
                .key("pk", s("p"))
                .key("sk", s(item))
                .update_expression(expression)
                .expression_attribute_names("#v", format!("value_{item}"))
                .expression_attribute_values(":v", s(&value))
                .expression_attribute_values(":h", AttributeValue::L(vec![s(&value)]))
                .expression_attribute_values(":empty", AttributeValue::L(vec![]))
                .expression_attribute_values(":zero", AttributeValue::N("0".into()))
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                .return_values(ReturnValue::AllNew)
                .send()
                .await
                .unwrap()
                .attributes
                .unwrap();
            assert_eq!(attrs.get(&format!("value_{item}")), Some(&s(&value)));
            assert_eq!(
                attrs.len(),
                5,
                "{item} round {round}: only its own names: {attrs:?}"
            );
            assert_eq!(
                attrs.get("n"),
                Some(&AttributeValue::N((round + 1).to_string()))
            );
            let history: Vec<AttributeValue> =
                (0..=round).map(|r| s(&format!("{item}-{r}"))).collect();
            assert_eq!(attrs.get("history"), Some(&AttributeValue::L(history)));
        }
    }
}

/// One answer read off `reader`: its status line, headers (lower-case names) and body,
/// framed by Content-Length or chunked encoding.
fn answer(reader: &mut BufReader<TcpStream>) -> (String, HashMap<String, String>, Vec<u8>) {
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let mut body = Vec::new();
    if let Some(length) = headers.get("content-length") {
        body.resize(length.parse().unwrap(), 0);
        reader.read_exact(&mut body).unwrap();
    } else if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).unwrap();
            let size = usize::from_str_radix(size.trim(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    (status.trim_end().to_string(), headers, body)
}

fn connect(endpoint: &str) -> (TcpStream, BufReader<TcpStream>) {
    let address = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let reader = BufReader::new(stream.try_clone().unwrap());
    (stream, reader)
}

#[tokio::test]
async fn one_connection_carries_request_after_request_whatever_their_bodies() {
    let aws = require_aws!();
    let (mut stream, mut reader) = connect(&aws.endpoint);
    // moto's timing route reads no body: the server must drain it before the next request.
    let unread = vec![b'x'; 200_000];
    let timing = "/_sortie/moto-timing";
    let mut requests: Vec<Vec<u8>> = Vec::new();
    requests.push(format!("GET {timing} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes());
    let mut post = format!(
        "POST {timing} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        unread.len()
    )
    .into_bytes();
    post.extend_from_slice(&unread);
    requests.push(post);
    requests.push(format!("GET {timing} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes());
    requests.push(
        format!(
            "POST {timing} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
             5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        )
        .into_bytes(),
    );
    requests.push(format!("GET {timing} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes());
    for (i, request) in requests.iter().enumerate() {
        stream.write_all(request).unwrap();
        let (status, headers, body) = answer(&mut reader);
        assert_eq!(status, "HTTP/1.1 200 OK", "request {i}");
        assert_ne!(
            headers.get("connection").map(String::as_str),
            Some("close"),
            "request {i}: the connection is kept"
        );
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(json.get("ops").is_some(), "request {i}: {json}");
    }
}

#[tokio::test]
async fn a_client_of_http_1_0_is_still_told_the_connection_closes() {
    let aws = require_aws!();
    let (mut stream, mut reader) = connect(&aws.endpoint);
    stream
        .write_all(b"GET /_sortie/moto-timing HTTP/1.0\r\nHost: t\r\n\r\n")
        .unwrap();
    let (status, headers, _) = answer(&mut reader);
    assert!(status.ends_with("200 OK"), "{status}");
    assert_eq!(headers.get("connection").map(String::as_str), Some("close"));
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    assert!(
        rest.is_empty(),
        "the server closed the connection after its answer"
    );
    // A client of HTTP/1.1 that asks to close is closed too.
    let (mut stream, mut reader) = connect(&aws.endpoint);
    stream
        .write_all(b"GET /_sortie/moto-timing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (_, headers, _) = answer(&mut reader);
    assert_eq!(headers.get("connection").map(String::as_str), Some("close"));
}

//! Encryption at rest through the engine, with a real AES-256-GCM and PBKDF2-SHA256 (the
//! `aes-gcm` and `pbkdf2` crates standing in for WebCrypto): the raw stored strings hold
//! none of the plaintext, a wrong passphrase is DECRYPT_FAILED with nothing written, a
//! tampered or moved value is CORRUPT_MEMORY naming the slot, plain and encrypted memory
//! are never mixed up, encrypting in place survives a crash at every write; the key record
//! is authenticated (a planted state or plaintext is refused), a lost one is named, a
//! rollback is ROLLBACK, rotation makes a new data key and survives a crash at every write,
//! and an instance opened before encrypt() or a rotation refuses to write.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[macro_use]
mod common;

#[path = "support/crashing_kv.rs"]
mod crashing_kv;

use aes_gcm::aead::{Aead as _, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use common::*;
use crashing_kv::CrashingKv;
use std::cell::Cell;
use std::rc::Rc;
use user_memory::crypto::{self, Aead, CryptoProvider, EncryptedStore, KeyRecord, UserKey, PBKDF2_ITERATIONS};
use user_memory::error::Result;
use user_memory::storage::{KvCapabilities, KvStore, MemoryKv, Slot, Store, VersionedKv};
use user_memory::sync::LocalFuture;

struct RealAead(Aes256Gcm);

/// Derived keys by (passphrase, salt, iterations).
type Derived = std::collections::HashMap<(String, Vec<u8>, u32), [u8; 32]>;

impl Aead for RealAead {
    fn seal<'a>(&'a self, iv: &'a [u8; 12], aad: &'a [u8], plain: &'a [u8]) -> LocalFuture<'a, Result<Vec<u8>>> {
        Box::pin(async move { Ok(self.0.encrypt(Nonce::from_slice(iv), Payload { msg: plain, aad }).unwrap()) })
    }
    fn open<'a>(&'a self, iv: &'a [u8; 12], aad: &'a [u8], sealed: &'a [u8]) -> LocalFuture<'a, Result<Option<Vec<u8>>>> {
        Box::pin(async move { Ok(self.0.decrypt(Nonce::from_slice(iv), Payload { msg: sealed, aad }).ok()) })
    }
}

/// Randomness from a counter-seeded generator (deterministic runs), real ciphers.
#[derive(Default)]
struct Provider {
    seed: Cell<u64>,
    derivations: Cell<usize>,
}

impl CryptoProvider for Provider {
    fn random(&self, buf: &mut [u8]) -> Result<()> {
        for b in buf {
            let s = self.seed.get().wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            self.seed.set(s);
            *b = (s >> 33) as u8;
        }
        Ok(())
    }
    fn import<'a>(&'a self, raw: &'a [u8]) -> LocalFuture<'a, Result<Rc<dyn Aead>>> {
        Box::pin(async move { Ok(Rc::new(RealAead(Aes256Gcm::new_from_slice(raw).unwrap())) as Rc<dyn Aead>) })
    }
    fn derive<'a>(&'a self, passphrase: &'a str, salt: &'a [u8], iterations: u32) -> LocalFuture<'a, Result<Rc<dyn Aead>>> {
        self.derivations.set(self.derivations.get() + 1);
        thread_local! {
            // The crash loop derives the same key dozens of times (each run starts from the
            // same seed, so the same salt): 600 000 iterations once per input is enough.
            static DERIVED: std::cell::RefCell<Derived> = Default::default();
        }
        let key = DERIVED.with(|d| {
            *d.borrow_mut().entry((passphrase.to_string(), salt.to_vec(), iterations)).or_insert_with(|| {
                let mut key = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<sha2::Sha256>(passphrase.as_bytes(), salt, iterations, &mut key);
                key
            })
        });
        Box::pin(async move { self.import(&key).await })
    }
    fn sha256<'a>(&'a self, data: &'a [u8]) -> LocalFuture<'a, Result<Vec<u8>>> {
        use sha2::Digest as _;
        Box::pin(async move { Ok(sha2::Sha256::digest(data).to_vec()) })
    }
}

fn passphrase(p: &str) -> UserKey {
    UserKey::Passphrase { passphrase: p.into(), salt: None }
}

fn versioned(kv: &Rc<MemoryKv>) -> Rc<dyn Store> {
    let kv: Rc<dyn KvStore> = kv.clone();
    Rc::new(VersionedKv::new(kv, "default"))
}

async fn open_enc(kv: &Rc<MemoryKv>, provider: &Rc<Provider>, key: &UserKey) -> Result<Rc<EncryptedStore>> {
    Ok(Rc::new(crypto::open(versioned(kv), "default", provider.clone(), key).await?))
}

/// Every raw stored string, concatenated.
fn raw(kv: &MemoryKv) -> String {
    kv.snapshot().into_iter().map(|(k, v)| format!("{k}={v}\n")).collect()
}

const SECRETS: [&str; 4] = ["penicillin", "Backend engineer", "moving to Lisbon", "Plays the cello"];

/// Fills memory: a summary, a fact, a forgotten fact (tombstone), a queued conversation.
async fn fill(rig: &Rig) {
    rig.engine.update_section("workContext", "Backend engineer").await.unwrap();
    let f = rig.engine.add_fact(&json!({"content": "Allergic to penicillin"})).await.unwrap();
    rig.engine.add_fact(&json!({"content": "Plays the cello"})).await.unwrap();
    rig.engine.remove_fact(&f.id, true).await.unwrap();
    rig.engine.observe("t1", &turn("I am moving to Lisbon next month", "Exciting")).unwrap().unwrap().await.unwrap();
}

#[test]
fn nothing_stored_is_plaintext_and_the_same_passphrase_reads_it_back() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let store = open_enc(&kv, &provider, &passphrase("correct horse")).await.unwrap();
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0)).store(store).open().await.unwrap();
        fill(&rig).await;
        let stored = raw(&kv);
        for s in SECRETS.iter().chain(&["allergic to penicillin", "correct horse"]) {
            assert!(!stored.to_lowercase().contains(&s.to_lowercase()), "{s:?} is in the raw store:\n{stored}");
        }
        let record = KeyRecord::parse(&kv.snapshot().into_iter().find(|(_, v)| v.starts_with(r#"{"encryption""#)).unwrap().1).unwrap();
        assert_eq!(record.kdf.as_ref().map(|k| k.0), Some(PBKDF2_ITERATIONS));
        assert_eq!(stored.matches("umenc2:").count(), 3, "document and queue sealed, the empty vectors slot's marker too:\n{stored}");

        let again = open_enc(&kv, &provider, &passphrase("correct horse")).await.unwrap();
        let other = RigBuilder::shared(&kv, &FakeClock::at(T0)).instance("B").store(again).open().await.unwrap();
        let doc = other.engine.get().await.unwrap();
        assert_eq!(doc.facts.iter().map(|f| f.content.as_str()).collect::<Vec<_>>(), ["Plays the cello"]);
        assert_eq!(doc.section(user_memory::SectionId::WorkContext).summary, "Backend engineer");
        assert_eq!(other.engine.forgotten().await.unwrap()[0].content, "allergic to penicillin");
        assert_eq!(other.engine.queue_status().pending.len(), 1, "the queued conversation decrypts");
        // Two instances with the same key keep working together.
        other.engine.add_fact(&json!({"content": "Drinks tea"})).await.unwrap();
        assert_eq!(rig.engine.get().await.unwrap().facts.len(), 2);
    });
}

#[test]
fn a_wrong_passphrase_is_decrypt_failed_and_writes_nothing() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .store(open_enc(&kv, &provider, &passphrase("right")).await.unwrap())
            .open()
            .await
            .unwrap();
        fill(&rig).await;
        let before = raw(&kv);
        let Err(e) = open_enc(&kv, &provider, &passphrase("wrong")).await else { panic!("opened with a wrong passphrase") };
        assert_eq!(e.code(), "DECRYPT_FAILED");
        assert!(!e.message().contains("wrong") && !e.message().contains("right"), "no passphrase in {:?}", e.message());
        let key = UserKey::Key(provider.import(&[7u8; 32]).await.unwrap());
        assert_eq!(open_enc(&kv, &provider, &key).await.err().unwrap().code(), "DECRYPT_FAILED", "a key for passphrase memory");
        assert_eq!(raw(&kv), before, "nothing was overwritten or deleted");
        // Without `encryption`: refused, not read as garbage nor overwritten.
        let e = crypto::open_plain(versioned(&kv), "default").await.err().unwrap();
        assert_eq!(e.code(), "DECRYPT_FAILED");
        assert!(format!("{key:?}").ends_with("(…)"), "a key never prints");
    });
}

#[test]
fn a_tampered_or_moved_value_is_corrupt_memory_naming_the_slot() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let key = UserKey::Key(provider.import(&[9u8; 32]).await.unwrap());
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0)).store(open_enc(&kv, &provider, &key).await.unwrap()).open().await.unwrap();
        fill(&rig).await;
        let snap = kv.snapshot();
        let value_of = |slot: &str| {
            snap.iter()
                .find(|(k, v)| k.contains(&format!("{slot}/")) && v.starts_with("umenc2:"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .unwrap()
        };
        let (doc_key, doc) = value_of("doc");
        let (_, queue) = value_of("queue");
        // One flipped character in the ciphertext.
        let i = doc.len() - 10;
        let flipped = format!("{}{}{}", &doc[..i], if &doc[i..=i] == "A" { "B" } else { "A" }, &doc[i + 1..]);
        kv.put_raw(&doc_key, &flipped);
        let store = open_enc(&kv, &provider, &key).await.unwrap();
        let e = store.load(Slot::Document).await.unwrap_err();
        assert_eq!(e.code(), "CORRUPT_MEMORY");
        assert!(e.message().contains("stored doc") && e.message().contains("altered"), "{}", e.message());
        // The queue's (valid) ciphertext moved into the document slot fails the same way.
        kv.put_raw(&doc_key, &queue);
        assert_eq!(store.load(Slot::Document).await.unwrap_err().code(), "CORRUPT_MEMORY");
        // A plaintext value planted in encrypted memory is refused, never read.
        kv.put_raw(&doc_key, r#"{"record":1,"memory":{"facts":[{"content":"planted"}]}}"#);
        let e = store.load(Slot::Document).await.unwrap_err();
        assert!(e.message().contains("not encrypted"), "{}", e.message());
        kv.put_raw(&doc_key, &doc);
        assert!(store.load(Slot::Document).await.unwrap().is_some(), "the original value still opens");
    });
}

#[test]
fn plain_memory_opened_with_encryption_is_refused_until_encrypted_in_place() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let plain = RigBuilder::shared(&kv, &FakeClock::at(T0)).open().await.unwrap();
        fill(&plain).await;
        crypto::open_plain(versioned(&kv), "default").await.map(drop).unwrap();
        let before = raw(&kv);
        let e = open_enc(&kv, &provider, &passphrase("p")).await.err().unwrap();
        assert_eq!(e.code(), "INVALID_INPUT");
        assert!(e.message().contains("UserMemory.encrypt()"), "{}", e.message());
        assert_eq!(raw(&kv), before, "nothing written");

        crypto::encrypt(versioned(&kv), "default", provider.clone(), &passphrase("p"), None).await.unwrap();
        let stored = raw(&kv);
        for s in SECRETS {
            assert!(!stored.contains(s), "{s:?} left in plaintext");
        }
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .store(open_enc(&kv, &provider, &passphrase("p")).await.unwrap())
            .open()
            .await
            .unwrap();
        assert_eq!(rig.engine.get().await.unwrap().facts[0].content, "Plays the cello");
        assert_eq!(rig.engine.queue_status().pending.len(), 1);
    });
}

#[test]
fn encrypting_in_place_survives_a_crash_at_every_write_and_the_next_run_finishes_it() {
    run(async {
        for caps in [KvCapabilities { keys: true, compare_and_set: true }, KvCapabilities { keys: false, compare_and_set: false }] {
            let mut crash_at = 0;
            loop {
                let kv = Rc::new(MemoryKv::new());
                let provider = Rc::new(Provider::default());
                fill(&RigBuilder::shared(&kv, &FakeClock::at(T0)).open().await.unwrap()).await;
                let crashing = Rc::new(CrashingKv::new(kv.clone(), crash_at, crash_at % 2 == 1, caps));
                let crashing_store: Rc<dyn Store> = Rc::new(VersionedKv::new(crashing.clone(), "default"));
                let first = crypto::encrypt(crashing_store, "default", provider.clone(), &passphrase("p"), None).await;
                let case = format!("crash at op {crash_at} ({caps:?})");
                // Whatever happened, the next run (or open) finishes and nothing is lost.
                if crash_at % 3 == 0 {
                    crypto::encrypt(versioned(&kv), "default", provider.clone(), &passphrase("p"), None).await.expect(&case);
                }
                let store = open_enc(&kv, &provider, &passphrase("p")).await.expect(&case);
                let rig = RigBuilder::shared(&kv, &FakeClock::at(T0)).store(store).open().await.expect(&case);
                let stored = raw(&kv);
                assert!(!stored.contains("migrating"), "{case}: the state was flipped");
                if caps.keys {
                    // Orphans included: a plain version left by a crash is cleaned up.
                    assert!(!stored.contains("cello") && !stored.contains("Lisbon"), "{case}: plaintext left:\n{stored}");
                } else {
                    for slot in [Slot::Document, Slot::Queue] {
                        let v = versioned(&kv).load(slot).await.unwrap().unwrap();
                        assert!(v.value.starts_with("umenc2:"), "{case}: {slot:?} is sealed");
                    }
                }
                assert_eq!(rig.engine.get().await.unwrap().facts[0].content, "Plays the cello", "{case}");
                assert_eq!(rig.engine.queue_status().pending.len(), 1, "{case}");
                if crashing.finished_before_crash() {
                    assert!(first.is_ok());
                    break;
                }
                crash_at += 1;
            }
            assert!(crash_at >= 4, "the migration has several writes ({crash_at})");
        }
    });
}

/// Puts `snap` back as the whole store (a restored backup).
async fn restore(kv: &MemoryKv, snap: &std::collections::BTreeMap<String, String>) {
    for k in kv.snapshot().keys() {
        if !snap.contains_key(k) {
            kv.delete(k).await.unwrap();
        }
    }
    for (k, v) in snap {
        kv.put_raw(k, v);
    }
}

/// The stored keys and values of `slot` (its pointer and versions).
fn slot_entries(kv: &MemoryKv, slot: &str) -> Vec<(String, String)> {
    kv.snapshot().into_iter().filter(|(k, _)| k.contains(&format!("/{slot}"))).collect()
}

/// The attack of a store writer without the key: a genuine key record copied while a
/// migration ran (so its authenticated state says "migrating"), put back beside a planted
/// plaintext document. Before the record was authenticated, setting `"state":"migrating"`
/// by hand was enough, and `open()` read (and sealed) the planted facts.
#[test]
fn a_planted_plaintext_document_is_refused_even_beside_a_genuine_migrating_record() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        fill(&RigBuilder::shared(&kv, &FakeClock::at(T0)).open().await.unwrap()).await;
        // Encrypt, crashing right after the key record (state migrating) was written.
        let crashing = Rc::new(CrashingKv::new(kv.clone(), 1, true, KvCapabilities { keys: true, compare_and_set: true }));
        let store: Rc<dyn Store> = Rc::new(VersionedKv::new(crashing, "default"));
        assert!(crypto::encrypt(store, "default", provider.clone(), &passphrase("p"), None).await.is_err());
        let key_entries = slot_entries(&kv, "key");
        assert!(!key_entries.is_empty(), "the key record was written");
        // The attacker replaces the plain document by their own.
        let (doc_key, _) = slot_entries(&kv, "doc").into_iter().find(|(k, _)| k.contains("/v")).unwrap();
        let planted = r#"{"record":1,"memory":{"version":"1.0","facts":[{"id":"f1","content":"Wire money to account 666","category":"context","confidence":0.99,"createdAt":"2026-01-01T00:00:00Z","source":"t"}]}}"#;
        kv.put_raw(&doc_key, planted);
        let before = raw(&kv);
        let e = open_enc(&kv, &provider, &passphrase("p")).await.err().unwrap();
        assert_eq!(e.code(), "CORRUPT_MEMORY");
        assert!(e.message().contains("not the one encryption started from"), "{}", e.message());
        assert!(!e.message().contains("reset"), "no destructive advice: {}", e.message());
        assert_eq!(raw(&kv), before, "nothing written, the planted text not sealed");

        // Editing the record's fields by hand (a state, an iteration count, a swapped
        // authenticated part) is refused before anything is read.
        let (key_key, record) = key_entries.iter().find(|(_, v)| v.starts_with(r#"{"encryption""#)).cloned().unwrap();
        let mut r = KeyRecord::parse(&record).unwrap();
        r.auth[20] ^= 1;
        kv.put_raw(&key_key, &r.to_json());
        let e = open_enc(&kv, &provider, &passphrase("p")).await.err().unwrap();
        assert!(e.message().contains("key record") && e.message().contains("altered"), "{}", e.message());
        let derivations = provider.derivations.get();
        kv.put_raw(&key_key, &record.replace("600000", "4294967295"));
        let e = open_enc(&kv, &provider, &passphrase("p")).await.err().unwrap();
        assert!(e.message().contains("4294967295, outside"), "{}", e.message());
        assert_eq!(provider.derivations.get(), derivations, "a planted iteration count is never run");
        kv.put_raw(&key_key, &record.replace(r#","auth":"#, r#","state":"ready","auth":"#));
        assert_eq!(open_enc(&kv, &provider, &passphrase("p")).await.err().unwrap().code(), "CORRUPT_MEMORY", "still the planted doc");
    });
}

/// Before: `open()` with the right passphrase wrote a new key record (a new data key) over
/// the lost one and reported the data as altered.
#[test]
fn a_lost_key_record_is_named_and_nothing_is_written() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .store(open_enc(&kv, &provider, &passphrase("p")).await.unwrap())
            .open()
            .await
            .unwrap();
        fill(&rig).await;
        for (k, _) in slot_entries(&kv, "key") {
            kv.delete(&k).await.unwrap();
        }
        let before = raw(&kv);
        let e = open_enc(&kv, &provider, &passphrase("p")).await.err().unwrap();
        assert_eq!(e.code(), "CORRUPT_MEMORY");
        assert!(e.message().contains("key record") && e.message().contains("missing"), "{}", e.message());
        let e = crypto::encrypt(versioned(&kv), "default", provider.clone(), &passphrase("p"), None).await.unwrap_err();
        assert!(e.message().contains("missing"), "{}", e.message());
        let e = crypto::open_plain(versioned(&kv), "default").await.err().unwrap();
        assert!(e.message().contains("missing"), "{}", e.message());
        // The instance still open refuses to write without it.
        let e = rig.engine.add_fact(&json!({"content": "Drinks tea"})).await.unwrap_err();
        assert!(e.message().contains("missing"), "{}", e.message());
        assert_eq!(raw(&kv), before, "nothing written");
    });
}

/// Before: putting back an older copy was taken as current (a forgotten fact returned).
#[test]
fn an_older_copy_put_back_is_rollback() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .store(open_enc(&kv, &provider, &passphrase("p")).await.unwrap())
            .open()
            .await
            .unwrap();
        let f = rig.engine.add_fact(&json!({"content": "Allergic to penicillin"})).await.unwrap();
        let backup = kv.snapshot();
        let old_doc = slot_entries(&kv, "doc");
        rig.engine.remove_fact(&f.id, true).await.unwrap();
        // 1. The old document's value under the current pointer: its sealed revision says so.
        let (new_key, _) = slot_entries(&kv, "doc").into_iter().find(|(k, v)| k.contains("/v") && v.starts_with("umenc2:")).unwrap();
        let (_, old_value) = old_doc.iter().find(|(k, _)| k.contains("/v")).cloned().unwrap();
        let current = kv.snapshot()[&new_key].clone();
        kv.put_raw(&new_key, &old_value);
        let e = open_enc(&kv, &provider, &passphrase("p")).await.unwrap().load(Slot::Document).await.unwrap_err();
        assert_eq!(e.code(), "ROLLBACK", "{}", e.message());
        kv.put_raw(&new_key, &current);
        // 2. The document slot of the backup (pointer and value), the key record current:
        // the key record's high-water mark says so.
        let doc_now = slot_entries(&kv, "doc");
        for (k, _) in &doc_now {
            kv.delete(k).await.unwrap();
        }
        for (k, v) in &old_doc {
            kv.put_raw(k, v);
        }
        let e = open_enc(&kv, &provider, &passphrase("p")).await.unwrap().load(Slot::Document).await.unwrap_err();
        assert_eq!(e.code(), "ROLLBACK");
        assert!(e.message().contains("older than revision"), "{}", e.message());
        // 3. The whole backup, key record included: this process saw newer (the limit: a
        // fresh process without a copy of the mark cannot tell).
        restore(&kv, &backup).await;
        let e = open_enc(&kv, &provider, &passphrase("p")).await.unwrap().load(Slot::Document).await.unwrap_err();
        assert_eq!(e.code(), "ROLLBACK");
        // Deleting the document is not a way around it either.
        for (k, _) in slot_entries(&kv, "doc") {
            kv.delete(&k).await.unwrap();
        }
        let e = open_enc(&kv, &provider, &passphrase("p")).await.unwrap().load(Slot::Document).await.unwrap_err();
        assert!(e.message().contains("missing"), "{}", e.message());
    });
}

/// Before: rotation re-wrapped the same data key, so the old passphrase and any old copy
/// of the key record decrypted everything written after it.
#[test]
fn rotation_makes_a_new_data_key_and_the_old_record_opens_nothing_written_later() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .store(open_enc(&kv, &provider, &passphrase("old")).await.unwrap())
            .open()
            .await
            .unwrap();
        fill(&rig).await;
        let old_record = slot_entries(&kv, "key");
        let before = kv.snapshot();
        crypto::encrypt(versioned(&kv), "default", provider.clone(), &passphrase("old"), Some(&passphrase("new"))).await.unwrap();
        for (k, v) in kv.snapshot() {
            if v.starts_with("umenc") {
                assert!(v.starts_with("umenc2:2."), "{k} re-sealed under generation 2: {v:.20}");
                assert!(!before.values().any(|b| *b == v));
            }
        }
        assert_eq!(open_enc(&kv, &provider, &passphrase("old")).await.err().unwrap().code(), "DECRYPT_FAILED");
        // The instance opened before the rotation refuses to write under the retired key.
        let e = rig.engine.add_fact(&json!({"content": "Stale key"})).await.unwrap_err();
        assert_eq!(e.code(), "DECRYPT_FAILED");
        assert!(e.message().contains("reopen it with the new `encryption`"), "{}", e.message());
        let again = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .instance("B")
            .store(open_enc(&kv, &provider, &passphrase("new")).await.unwrap())
            .open()
            .await
            .unwrap();
        again.engine.add_fact(&json!({"content": "Written after the rotation"})).await.unwrap();
        assert_eq!(again.engine.get().await.unwrap().facts.len(), 2);
        // The old passphrase with the old key record (any backup has one) opens nothing
        // written since.
        let current_key = slot_entries(&kv, "key");
        for (k, _) in &current_key {
            kv.delete(k).await.unwrap();
        }
        for (k, v) in &old_record {
            kv.put_raw(k, v);
        }
        let old = open_enc(&kv, &provider, &passphrase("old")).await.unwrap();
        assert_eq!(old.load(Slot::Document).await.unwrap_err().code(), "DECRYPT_FAILED", "sealed under a newer key");
    });
}

/// A passphrase with a fixed salt (each run has other random bytes, for other memory ids,
/// and PBKDF2 runs once per passphrase).
fn salted(p: &str) -> UserKey {
    UserKey::Passphrase { passphrase: p.into(), salt: Some(vec![5; 16]) }
}

#[test]
fn rotation_survives_a_crash_at_every_write() {
    run(async {
        let mut crash_at = 0;
        loop {
            let kv = Rc::new(MemoryKv::new());
            let provider = Rc::new(Provider { seed: Cell::new(crash_at as u64 * 7919 + 1), ..Default::default() });
            fill(
                &RigBuilder::shared(&kv, &FakeClock::at(T0))
                    .store(open_enc(&kv, &provider, &salted("old")).await.unwrap())
                    .open()
                    .await
                    .unwrap(),
            )
            .await;
            let crashing =
                Rc::new(CrashingKv::new(kv.clone(), crash_at, crash_at % 2 == 1, KvCapabilities { keys: true, compare_and_set: true }));
            let store: Rc<dyn Store> = Rc::new(VersionedKv::new(crashing.clone(), "default"));
            let first = crypto::encrypt(store, "default", provider.clone(), &salted("old"), Some(&salted("new"))).await;
            let case = format!("crash at op {crash_at}");
            // The same call again finishes it, or open() with the new key does.
            if crash_at % 3 == 0 {
                crypto::encrypt(versioned(&kv), "default", provider.clone(), &salted("old"), Some(&salted("new"))).await.expect(&case);
            }
            let opened = match open_enc(&kv, &provider, &salted("new")).await {
                Ok(s) => s,
                // The crash came before the new record landed: the old key still opens it.
                Err(e) if e.code() == "DECRYPT_FAILED" => {
                    assert!(first.is_err(), "{case}");
                    crypto::encrypt(versioned(&kv), "default", provider.clone(), &salted("old"), Some(&salted("new"))).await.expect(&case);
                    open_enc(&kv, &provider, &salted("new")).await.expect(&case)
                }
                Err(e) => panic!("{case}: {e}"),
            };
            let rig = RigBuilder::shared(&kv, &FakeClock::at(T0)).store(opened).open().await.expect(&case);
            assert_eq!(rig.engine.get().await.unwrap().facts[0].content, "Plays the cello", "{case}");
            assert_eq!(rig.engine.queue_status().pending.len(), 1, "{case}");
            for slot in [Slot::Document, Slot::Queue] {
                let v = versioned(&kv).load(slot).await.unwrap().unwrap();
                assert!(v.value.starts_with("umenc2:2."), "{case}: {slot:?} re-sealed: {:.12}", v.value);
            }
            assert_eq!(open_enc(&kv, &provider, &salted("old")).await.err().unwrap().code(), "DECRYPT_FAILED", "{case}");
            if crashing.finished_before_crash() {
                assert!(first.is_ok());
                break;
            }
            crash_at += 1;
        }
        assert!(crash_at >= 6, "the rotation has several writes ({crash_at})");
    });
}

/// Before: an instance without `encryption` opened before `UserMemory.encrypt()` wrote its
/// next conversation in plaintext, dropped the encrypted queue as unreadable, and its
/// `addFact` failed with advice to reset (which deletes the memory).
#[test]
fn an_instance_opened_before_encrypt_never_writes_plaintext_into_encrypted_memory() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let plain_store: Rc<dyn Store> = Rc::new(crypto::open_plain(versioned(&kv), "default").await.unwrap());
        let plain = RigBuilder::shared(&kv, &FakeClock::at(T0)).store(plain_store).open().await.unwrap();
        fill(&plain).await;
        crypto::encrypt(versioned(&kv), "default", provider.clone(), &passphrase("p"), None).await.unwrap();
        let before = raw(&kv);
        let e = plain.engine.add_fact(&json!({"content": "Secret plan"})).await.unwrap_err();
        assert_eq!(e.code(), "DECRYPT_FAILED");
        assert!(e.message().contains("now encrypted") && e.message().contains("reopen it with `encryption`"), "{}", e.message());
        assert!(!e.message().contains("reset"), "{}", e.message());
        let queued = plain.engine.observe("t2", &turn("My PIN is 4321", "Noted"));
        if let Ok(Some(wait)) = queued {
            let _ = wait.await;
        }
        let _ = plain.engine.flush().await;
        assert_eq!(raw(&kv), before, "nothing written, the encrypted queue not dropped");
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .instance("B")
            .store(open_enc(&kv, &provider, &passphrase("p")).await.unwrap())
            .open()
            .await
            .unwrap();
        assert_eq!(rig.engine.queue_status().pending.len(), 1, "the encrypted queued conversation is intact");
    });
}

/// A store that runs `between` once, just before its first commit of `slot` goes through:
/// another process encrypting or rotating after a writer checked the key record and before
/// its write lands.
struct RaceStore {
    inner: Rc<dyn Store>,
    slot: Slot,
    between: std::cell::RefCell<Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>>>,
}

impl Store for RaceStore {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<user_memory::storage::Versioned>>> {
        self.inner.load(slot)
    }
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<user_memory::storage::Commit>> {
        Box::pin(async move {
            let between = if slot == self.slot { self.between.borrow_mut().take() } else { None };
            if let Some(between) = between {
                between.await;
            }
            self.inner.commit(slot, base, value).await
        })
    }
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        self.inner.discard(slot)
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

fn race(kv: &Rc<MemoryKv>, slot: Slot, between: impl std::future::Future<Output = ()> + 'static) -> Rc<dyn Store> {
    Rc::new(RaceStore { inner: versioned(kv), slot, between: std::cell::RefCell::new(Some(Box::pin(between))) })
}

/// Before: a writer without `encryption` that checked for a key record, then wrote the first
/// value of a slot (based on revision 0) after another process encrypted the memory, landed
/// that value in plaintext beside the encrypted ones (the migration had found the slot empty
/// and left it so). Now encrypted memory leaves no slot empty (a sealed "no value" marker):
/// the late write conflicts, the writer re-reads and refuses.
#[test]
fn a_plain_write_racing_encrypt_lands_no_plaintext() {
    run(async {
        // 1. Plain memory with a document; the queue's first value races encrypt().
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let (k2, p2) = (kv.clone(), provider.clone());
        let between = async move {
            crypto::encrypt(versioned(&k2), "default", p2, &passphrase("p"), None).await.unwrap();
        };
        let plain_store: Rc<dyn Store> = Rc::new(crypto::open_plain(race(&kv, Slot::Queue, between), "default").await.unwrap());
        let plain = RigBuilder::shared(&kv, &FakeClock::at(T0)).store(plain_store).open().await.unwrap();
        plain.engine.add_fact(&json!({"content": "Plays the cello"})).await.unwrap();
        let queued = plain.engine.observe("t1", &turn("My PIN is 4321", "Noted"));
        let e = match queued {
            Ok(Some(wait)) => wait.await.unwrap_err(),
            Ok(None) => panic!("observe queued nothing"),
            Err(e) => e,
        };
        assert_eq!(e.code(), "DECRYPT_FAILED", "{}", e.message());
        assert!(e.message().contains("now encrypted"), "{}", e.message());
        let stored = raw(&kv);
        assert!(!stored.contains("4321") && !stored.contains("cello"), "no plaintext in the store:\n{stored}");
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .instance("B")
            .store(open_enc(&kv, &provider, &passphrase("p")).await.unwrap())
            .open()
            .await
            .unwrap();
        assert_eq!(rig.engine.get().await.unwrap().facts[0].content, "Plays the cello", "the encrypted memory reads");

        // 2. Empty memory: the first document races another process creating encrypted memory.
        let kv = Rc::new(MemoryKv::new());
        let (k2, p2) = (kv.clone(), provider.clone());
        let between = async move {
            crypto::open(versioned(&k2), "default", p2, &passphrase("p")).await.unwrap();
        };
        let plain_store: Rc<dyn Store> = Rc::new(crypto::open_plain(race(&kv, Slot::Document, between), "default").await.unwrap());
        let plain = RigBuilder::shared(&kv, &FakeClock::at(T0)).store(plain_store).open().await.unwrap();
        let e = plain.engine.add_fact(&json!({"content": "Secret plan"})).await.unwrap_err();
        assert_eq!(e.code(), "DECRYPT_FAILED", "{}", e.message());
        assert!(!raw(&kv).contains("Secret plan"), "no plaintext in the store:\n{}", raw(&kv));
    });
}

/// The same race for a rotation: an instance of the old key that checked the key record,
/// then wrote a slot's first value after the rotation, landed a value only the old key opens.
#[test]
fn a_write_racing_a_rotation_lands_nothing_under_the_retired_key() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let (k2, p2) = (kv.clone(), provider.clone());
        let between = async move {
            crypto::encrypt(versioned(&k2), "default", p2, &passphrase("old"), Some(&passphrase("new"))).await.unwrap();
        };
        open_enc(&kv, &provider, &passphrase("old")).await.unwrap();
        let store = crypto::open(race(&kv, Slot::Queue, between), "default", provider.clone(), &passphrase("old")).await.unwrap();
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0)).store(Rc::new(store)).open().await.unwrap();
        let e = match rig.engine.observe("t1", &turn("My PIN is 4321", "Noted")) {
            Ok(Some(wait)) => wait.await.unwrap_err(),
            Ok(None) => panic!("observe queued nothing"),
            Err(e) => e,
        };
        assert_eq!(e.code(), "DECRYPT_FAILED", "{}", e.message());
        for (k, v) in kv.snapshot() {
            if v.starts_with("umenc") {
                assert!(v.starts_with("umenc2:2."), "{k} is sealed under the new data key: {v:.12}");
            }
        }
    });
}

/// The limit of the high-water mark, checked: the queue has none (only the document has),
/// so an older queue put back alone is read. What it can do is bounded by the document's
/// per-thread watermarks: the conversation it holds again was already extracted, and is
/// skipped without a model call, so a fact the user removed is not learned back from it.
#[test]
fn an_older_queue_put_back_alone_re_runs_nothing_the_document_already_learned() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .replies(vec![reply_with_facts(&["Lives in Lisbon"])])
            .store(open_enc(&kv, &provider, &passphrase("p")).await.unwrap())
            .open()
            .await
            .unwrap();
        rig.engine.observe("t1", &turn("I live in Lisbon", "Nice")).unwrap().unwrap().await.unwrap();
        let old_queue = slot_entries(&kv, "queue");
        rig.engine.flush().await.unwrap();
        let f = rig.engine.cached().facts[0].clone();
        rig.engine.remove_fact(&f.id, false).await.unwrap();
        for (k, _) in slot_entries(&kv, "queue") {
            kv.delete(&k).await.unwrap();
        }
        for (k, v) in &old_queue {
            kv.put_raw(k, v);
        }
        let again = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .instance("B")
            .replies(vec![reply_with_facts(&["Lives in Lisbon"])])
            .store(open_enc(&kv, &provider, &passphrase("p")).await.unwrap())
            .open()
            .await
            .unwrap();
        assert_eq!(again.engine.queue_status().pending.len(), 1, "the older queue is read (no mark for the queue)");
        again.engine.flush().await.unwrap();
        assert_eq!(again.llm.calls(), 0, "the watermark skips the conversation already extracted");
        assert!(again.engine.get().await.unwrap().facts.is_empty(), "the removed fact is not learned back");
    });
}

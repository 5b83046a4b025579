//! Encryption at rest through the engine, with a real AES-256-GCM and PBKDF2-SHA256 (the
//! `aes-gcm` and `pbkdf2` crates standing in for WebCrypto): the raw stored strings hold
//! none of the plaintext, a wrong passphrase is DECRYPT_FAILED with nothing written, a
//! tampered or moved value is CORRUPT_MEMORY naming the slot, plain and encrypted memory
//! are never mixed up, encrypting in place survives a crash at every write, and rotating
//! the key is one write.

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
        assert!(!record.migrating);
        assert_eq!(stored.matches("umenc1:").count(), 2, "document and queue are sealed:\n{stored}");

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
        let e = crypto::refuse_encrypted(&*versioned(&kv), "default").await.unwrap_err();
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
                .find(|(k, v)| k.contains(&format!("{slot}/")) && v.starts_with("umenc1:"))
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
        crypto::refuse_encrypted(&*versioned(&kv), "default").await.unwrap();
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
                        assert!(v.value.starts_with("umenc1:"), "{case}: {slot:?} is sealed");
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

#[test]
fn rotating_the_key_is_one_write_and_the_old_passphrase_stops_working() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let provider = Rc::new(Provider::default());
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .store(open_enc(&kv, &provider, &passphrase("old")).await.unwrap())
            .open()
            .await
            .unwrap();
        fill(&rig).await;
        let before = kv.snapshot();
        let counting = Rc::new(CrashingKv::new(kv.clone(), usize::MAX, false, KvCapabilities { keys: true, compare_and_set: true }));
        let store: Rc<dyn Store> = Rc::new(VersionedKv::new(counting.clone(), "default"));
        crypto::encrypt(store, "default", provider.clone(), &passphrase("old"), Some(&passphrase("new"))).await.unwrap();
        let after = kv.snapshot();
        let changed: Vec<&String> = after.iter().filter(|(k, v)| before.get(*k) != Some(*v)).map(|(k, _)| k).collect();
        assert!(changed.iter().all(|k| k.contains("key")), "only the key record changed: {changed:?}");
        assert_eq!(open_enc(&kv, &provider, &passphrase("old")).await.err().unwrap().code(), "DECRYPT_FAILED");
        // The data key is the same: the instance opened before keeps working.
        rig.engine.add_fact(&json!({"content": "Rotated fine"})).await.unwrap();
        let again = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .instance("B")
            .store(open_enc(&kv, &provider, &passphrase("new")).await.unwrap())
            .open()
            .await
            .unwrap();
        assert_eq!(again.engine.get().await.unwrap().facts.len(), 2);
    });
}

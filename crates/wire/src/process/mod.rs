//! openProcess across the hop: stdin under a credit window, stdout and
//! stderr as offset-numbered chunks acknowledged by the runner within a
//! replay window, the exit as its own frame.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use checkfu_sandbox_contract::wire::{decode_fields, decode_value};
use checkfu_sandbox_contract::*;
use futures_util::{AsyncReadExt, AsyncWriteExt};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{mpsc, watch, Notify};

use crate::client::{Broken, Conn};
use crate::protocol::*;

mod runner;
mod served;

use self::runner::ROLLBACK_BOUND_SECONDS;
pub(crate) use self::runner::{client_notification, client_process, register, ClientProcess};
pub(crate) use self::served::{serve_process, ServerProcess};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn index(s: StreamName) -> usize {
    match s {
        StreamName::Stdout => 0,
        StreamName::Stderr => 1,
    }
}

//! The saved cost models that rank zero-shot candidates, loaded once per target and reloaded
//! when a job saves a newer one: a model's bytes are read and parsed only when its row changed,
//! not on every answer, and the row's stamp is read at most once per `RECHECK` (it was one of
//! the six statements of every zero-shot answer).

use crate::jobs::start_model::MODEL_KIND;
use crate::jobs::store::JobStore;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tunehub_costmodel::XgbModel;

/// How long a loaded model answers before its row's stamp is read again: a newer model saved
/// meanwhile ranks the answers from then on (the best-record cache's default lag).
const RECHECK: Duration = Duration::from_secs(2);

/// A loaded model, shared by the answers that rank with it (prediction needs `&mut`).
pub type SharedModel = Arc<Mutex<XgbModel>>;

/// A model loaded from a target's saved row.
struct Loaded {
    /// The row's `updated_at`.
    stamp: i64,
    /// When the stamp was last read.
    checked: Instant,
    model: SharedModel,
}

/// Per target key: the model loaded from its saved row.
#[derive(Default)]
pub struct ModelCache {
    loaded: Mutex<HashMap<String, Loaded>>,
}

impl ModelCache {
    /// The saved model of `target_key`, or `None` when it has none, or none that loads (a model
    /// only orders candidates: without one they are taken by distance).
    pub async fn get(&self, jobs: &JobStore, target_key: &str) -> Option<SharedModel> {
        if let Some(l) = self.lock().get(target_key)
            && l.checked.elapsed() < RECHECK
        {
            return Some(Arc::clone(&l.model));
        }
        let checked = Instant::now();
        let stamp = match jobs.cost_model_stamp(target_key).await {
            Ok(Some((kind, at))) if kind == MODEL_KIND => at,
            Ok(_) => {
                self.lock().remove(target_key);
                return None;
            }
            Err(e) => {
                tracing::warn!(target_key, "reading the saved cost model's stamp: {e}");
                return None;
            }
        };
        if let Some(l) = self.lock().get_mut(target_key)
            && l.stamp == stamp
        {
            l.checked = checked;
            return Some(Arc::clone(&l.model));
        }
        let (_, bytes, _) = jobs.cost_model(target_key).await.ok().flatten()?;
        let model = XgbModel::load(&bytes)
            .inspect_err(|e| tracing::warn!(target_key, "saved cost model ignored: {e}"))
            .ok()?;
        let model = Arc::new(Mutex::new(model));
        let loaded = Loaded {
            stamp,
            checked,
            model: Arc::clone(&model),
        };
        self.lock().insert(target_key.to_string(), loaded);
        Some(model)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Loaded>> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }
}

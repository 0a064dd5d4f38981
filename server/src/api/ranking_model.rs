//! The saved cost models that rank zero-shot candidates, loaded once per target and reloaded
//! when a job saves a newer one: a model's bytes are read and parsed only when its row changed,
//! not on every answer.

use crate::jobs::start_model::MODEL_KIND;
use crate::jobs::store::JobStore;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tunehub_costmodel::XgbModel;

/// A loaded model, shared by the answers that rank with it (prediction needs `&mut`).
pub type SharedModel = Arc<Mutex<XgbModel>>;

/// Per target key: the saved row's `updated_at` and the model loaded from it.
#[derive(Default)]
pub struct ModelCache {
    loaded: Mutex<HashMap<String, (i64, SharedModel)>>,
}

impl ModelCache {
    /// The saved model of `target_key`, or `None` when it has none, or none that loads (a model
    /// only orders candidates: without one they are taken by distance).
    pub async fn get(&self, jobs: &JobStore, target_key: &str) -> Option<SharedModel> {
        let stamp = match jobs.cost_model_stamp(target_key).await {
            Ok(Some((kind, at))) if kind == MODEL_KIND => at,
            Ok(_) => return None,
            Err(e) => {
                tracing::warn!(target_key, "reading the saved cost model's stamp: {e}");
                return None;
            }
        };
        if let Some((at, m)) = self.lock().get(target_key)
            && *at == stamp
        {
            return Some(Arc::clone(m));
        }
        let (_, bytes, _) = jobs.cost_model(target_key).await.ok().flatten()?;
        let model = XgbModel::load(&bytes)
            .inspect_err(|e| tracing::warn!(target_key, "saved cost model ignored: {e}"))
            .ok()?;
        let model = Arc::new(Mutex::new(model));
        self.lock()
            .insert(target_key.to_string(), (stamp, Arc::clone(&model)));
        Some(model)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (i64, SharedModel)>> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }
}

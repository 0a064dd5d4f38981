//! The learned cost model (features of lowered programs, XGBoost ranking) arrives with its own
//! issue; until then the search uses the engine's sampler alone.

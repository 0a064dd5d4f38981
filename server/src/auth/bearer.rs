//! The client side of the tokens: the bearer metadata every call of a client carries.

use tonic::metadata::MetadataValue;
use tonic::{Request, Status};

/// The client side: adds the token to every call.
#[derive(Clone, Debug)]
pub struct BearerToken(Option<MetadataValue<tonic::metadata::Ascii>>);

impl BearerToken {
    pub fn new(token: Option<&str>) -> Result<Self, String> {
        token
            .map(|t| {
                format!("Bearer {t}")
                    .parse()
                    .map_err(|_| "the API token has characters not allowed in metadata".to_string())
            })
            .transpose()
            .map(BearerToken)
    }
}

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

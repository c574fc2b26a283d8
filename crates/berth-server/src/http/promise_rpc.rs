//! Promise's envelope for the errors of its RPCs (`/promise/create-reservation` and the other
//! kebab-case routes): the problem document with Promise's `result` and `message` beside it.
//! The Promise handlers use it for their own errors, and the authorization middleware for the
//! refusals it makes before any handler runs (the `noauth` guard, 401, 403), so an RPC answers
//! every error the same way.

use crate::http::error::ApiError;
use berth_api::promise::RpcFailure;

/// The route templates of Promise's RPCs.
const RPC_ROUTES: [&str; 9] = [
    "/promise/create-reservation",
    "/promise/update-reservation",
    "/promise/cancel-reservation",
    "/promise/query-reservation",
    "/promise/query-capacity",
    "/promise/create-instance",
    "/promise/destroy-instance",
    "/promise/increase-capacity",
    "/promise/decrease-capacity",
];

/// Whether `route` (a matched route template) is a Promise RPC.
pub fn is_rpc(route: &str) -> bool {
    RPC_ROUTES.contains(&route)
}

/// An RPC error: the problem document carries Promise's `result` (`conflict` for 409, else
/// `error`) and `message` as well.
pub fn rpc_error(error: ApiError) -> ApiError {
    let result = match error.status() {
        axum::http::StatusCode::CONFLICT => "conflict",
        _ => "error",
    };
    let failure = RpcFailure {
        result: result.to_owned(),
        message: error.detail().to_owned(),
    };
    error.merge_extra(failure)
}

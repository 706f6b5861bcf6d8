//! What the example programs under `src/bin/` share: running futures that use tokio's sockets
//! and timers on a cotenant pool ([`tokio_on_cotenant`]), the small hand-written HTTP client of
//! their self-checks and of the benchmark's load ([`http_client`]), and the benchmark's
//! arithmetic and report ([`comparison`]).

pub mod comparison;
pub mod http_client;
pub mod tokio_on_cotenant;

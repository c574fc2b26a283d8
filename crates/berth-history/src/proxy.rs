//! A TCP proxy between one replica and PostgreSQL that the nemesis can cut (every connection
//! through it dropped, new ones refused) and heal: a network partition between that replica and
//! the database, without network namespaces.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running proxy.
#[derive(Debug)]
pub struct Proxy {
    /// The port replicas connect to, on 127.0.0.1.
    pub port: u16,
    cut: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy to 127.0.0.1:`upstream`.
    pub async fn start(upstream: u16) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let cut = Arc::new(AtomicBool::new(false));
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = tokio::spawn({
            let cut = Arc::clone(&cut);
            let links = Arc::clone(&links);
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if cut.load(Ordering::SeqCst) {
                        drop(inbound);
                        continue;
                    }
                    let link = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", upstream)).await
                        {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    let mut links = links.lock().expect("the links lock");
                    links.retain(|link| !link.is_finished());
                    links.push(link);
                }
            }
        });
        Ok(Proxy {
            port,
            cut,
            links,
            accept,
        })
    }

    /// Cuts the link: drops every connection and refuses new ones until [`Proxy::heal`].
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for link in self.links.lock().expect("the links lock").drain(..) {
            link.abort();
        }
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An upstream that echoes what it reads.
    async fn echo() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = stream.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        port
    }

    /// Whether a round trip through `stream` comes back.
    async fn round_trip(stream: &mut TcpStream) -> bool {
        if stream.write_all(b"ping").await.is_err() {
            return false;
        }
        let mut back = [0_u8; 4];
        let read = tokio::time::timeout(Duration::from_secs(2), stream.read_exact(&mut back)).await;
        matches!(read, Ok(Ok(_))) && &back == b"ping"
    }

    #[tokio::test]
    async fn a_cut_drops_every_connection_and_refuses_new_ones_until_healed() {
        let proxy = Proxy::start(echo().await).await.expect("the proxy");
        let mut before = TcpStream::connect(("127.0.0.1", proxy.port))
            .await
            .expect("connect");
        assert!(round_trip(&mut before).await, "the proxy passes traffic");
        proxy.cut();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !round_trip(&mut before).await,
            "a connection open at the cut is dropped"
        );
        let mut during = TcpStream::connect(("127.0.0.1", proxy.port))
            .await
            .expect("accepted, then closed");
        assert!(
            !round_trip(&mut during).await,
            "a connection made during the cut is closed"
        );
        proxy.heal();
        let mut after = TcpStream::connect(("127.0.0.1", proxy.port))
            .await
            .expect("connect");
        assert!(
            round_trip(&mut after).await,
            "healed, the proxy passes traffic again"
        );
    }
}

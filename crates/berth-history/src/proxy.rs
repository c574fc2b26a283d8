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

//! The reliable control channel: one TCP connection per pair of ranks (tokio). The
//! higher rank connects to the lower; both open with a HELLO naming job and rank, so a
//! stray connection or another job's process is refused. Frames go both ways as the
//! protocol core asks; a connection that closes or sends nonsense is reported, so the
//! collectives waiting on that rank fail at once instead of timing out.

use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use std::os::fd::AsRawFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::sockopt::set_int;
use endhost_core::proto::Control;

/// What the control channel tells the datapath thread.
#[derive(Debug)]
pub enum Incoming {
    Control { peer: u16, message: Control },
    Lost { peer: u16, why: String },
}

/// Everyone's control address, by rank.
#[derive(Debug, Clone)]
pub struct MeshConfig {
    pub job: u32,
    pub rank: u16,
    pub addresses: Vec<SocketAddrV4>,
    /// How long to keep trying to reach peers that have not started yet.
    pub connect_timeout: Duration,
    /// IP TOS of the control connections: the control DSCP (its own switch queue).
    pub tos: u8,
}

/// Connected: a sender per peer (`None` for this rank), and the tasks writing to
/// them, which end once their sender is dropped and everything queued is written.
pub struct Mesh {
    pub outgoing: Vec<Option<UnboundedSender<Control>>>,
    pub writers: Vec<tokio::task::JoinHandle<()>>,
}

#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddrV4,
        #[source]
        source: io::Error,
    },
    #[error("rank {peer} at {address} did not answer within {seconds} s ({last})")]
    Unreachable {
        peer: u16,
        address: SocketAddrV4,
        seconds: u64,
        last: String,
    },
    #[error("control connection from {from}: {why}")]
    Refused { from: SocketAddr, why: String },
    #[error("waiting for ranks {missing:?} to connect: gave up after {seconds} s")]
    Incomplete { missing: Vec<u16>, seconds: u64 },
}

/// Connects this rank to every other and starts the reader and writer tasks; frames
/// and losses go to `incoming` (as whatever the receiver's messages are made from an
/// [`Incoming`]), after which `wake` is called.
pub async fn connect<T: From<Incoming> + Send + 'static>(
    config: &MeshConfig,
    incoming: std::sync::mpsc::Sender<T>,
    wake: impl Fn() + Clone + Send + Sync + 'static,
) -> Result<Mesh, MeshError> {
    let me = config.rank;
    let world = config.addresses.len() as u16;
    let listen = config.addresses[usize::from(me)];
    let listener = listen_on(listen, config.tos).map_err(|source| MeshError::Listen {
        address: listen,
        source,
    })?;
    let deadline = Instant::now() + config.connect_timeout;
    // Each connection, with what arrived after its HELLO: a peer that is already up
    // may send its first frames right behind it.
    let mut streams: Vec<Option<(TcpStream, Vec<u8>)>> = (0..world).map(|_| None).collect();
    // Lower ranks: we call them.
    for peer in 0..me {
        let address = config.addresses[usize::from(peer)];
        let stream = dial(config, peer, address, deadline).await?;
        streams[usize::from(peer)] = Some(stream);
    }
    // Higher ranks call us. Every accepted connection gets a bounded time to say HELLO,
    // all of them at once, so a stray connection that says nothing holds nobody up; one
    // that is not a missing peer of this job is closed and waiting goes on.
    let mut missing: Vec<u16> = (me + 1..world).collect();
    let mut handshakes = tokio::task::JoinSet::new();
    while !missing.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, from)) => {
                    tune(&stream);
                    let limit = HELLO_TIMEOUT.min(left);
                    handshakes.spawn(answer_hello(stream, from, config.job, me, limit));
                }
                // A full file table or a connection reset before accept: wait, go on.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(done) = handshakes.join_next(), if !handshakes.is_empty() => {
                let Ok(done) = done else { continue };
                match done {
                    Ok((peer, stream, rest)) if missing.contains(&peer) => {
                        missing.retain(|&m| m != peer);
                        streams[usize::from(peer)] = Some((stream, rest));
                    }
                    Ok((peer, _, _)) => eprintln!(
                        "endhost: ignored a control connection from rank {peer}: \
                         not expected (already connected, or lower)"
                    ),
                    Err(refused) => eprintln!("endhost: ignored a {refused}"),
                }
            }
            () = tokio::time::sleep(left) => {
                return Err(MeshError::Incomplete {
                    missing,
                    seconds: config.connect_timeout.as_secs(),
                });
            }
        }
    }
    let mut outgoing = Vec::with_capacity(usize::from(world));
    let mut writers = Vec::new();
    for (peer, stream) in streams.into_iter().enumerate() {
        let Some((stream, rest)) = stream else {
            outgoing.push(None);
            continue;
        };
        let (reader, writer) = stream.into_split();
        let (tx, rx) = unbounded_channel();
        writers.push(tokio::spawn(write_frames(writer, rx)));
        tokio::spawn(read_frames(
            reader,
            rest,
            peer as u16,
            incoming.clone(),
            wake.clone(),
        ));
        outgoing.push(Some(tx));
    }
    Ok(Mesh { outgoing, writers })
}

/// How long a connecting peer may take to say HELLO.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// One accepted connection's handshake, within `limit`: its HELLO read, ours sent.
async fn answer_hello(
    mut stream: TcpStream,
    from: SocketAddr,
    job: u32,
    me: u16,
    limit: Duration,
) -> Result<(u16, TcpStream, Vec<u8>), MeshError> {
    let refused = |why: String| MeshError::Refused { from, why };
    let handshake = async {
        let (peer, rest) = read_hello(&mut stream, job).await?;
        write_hello(&mut stream, job, me)
            .await
            .map_err(|e| e.to_string())?;
        Ok((peer, rest))
    };
    match tokio::time::timeout(limit, handshake).await {
        Ok(Ok((peer, rest))) => Ok((peer, stream, rest)),
        Ok(Err(why)) => Err(refused(why)),
        Err(_) => Err(refused(format!("no HELLO within {} ms", limit.as_millis()))),
    }
}

async fn dial(
    config: &MeshConfig,
    peer: u16,
    address: SocketAddrV4,
    deadline: Instant,
) -> Result<(TcpStream, Vec<u8>), MeshError> {
    let mut last = String::from("no attempt");
    while Instant::now() < deadline {
        let connected = match socket(config.tos) {
            Ok(socket) => socket.connect(address.into()).await,
            Err(e) => Err(e),
        };
        match connected {
            Ok(mut stream) => {
                tune(&stream);
                let handshake = async {
                    write_hello(&mut stream, config.job, config.rank)
                        .await
                        .map_err(|e| e.to_string())?;
                    read_hello(&mut stream, config.job).await
                };
                match tokio::time::timeout(Duration::from_secs(5), handshake).await {
                    Ok(Ok((rank, rest))) if rank == peer => return Ok((stream, rest)),
                    Ok(Ok((rank, _))) => last = format!("rank {rank} answered instead"),
                    Ok(Err(why)) => last = why,
                    Err(_) => last = "no HELLO in 5 s".into(),
                }
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(MeshError::Unreachable {
        peer,
        address,
        seconds: config.connect_timeout.as_secs(),
        last,
    })
}

/// A TCP socket whose packets, from the SYN on, carry the control DSCP (its own
/// switch queue). Accepted connections inherit it from the listening socket.
fn socket(tos: u8) -> io::Result<TcpSocket> {
    let socket = TcpSocket::new_v4()?;
    set_int(
        socket.as_raw_fd(),
        libc::IPPROTO_IP,
        libc::IP_TOS,
        libc::c_int::from(tos),
    )?;
    Ok(socket)
}

/// linux/tcp.h, Linux 6.15 and later.
const TCP_RTO_MIN_US: libc::c_int = 45;
/// The control channel's retransmission floor. Linux's default, 200 ms, is longer than
/// a whole collective step: one lost STOP or bitmap would stall the collective that
/// long. Spurious retransmissions of these small frames cost next to nothing.
const CONTROL_RTO_MIN_US: libc::c_int = 5_000;

/// No Nagle delay; a short retransmission floor where the kernel allows one per socket
/// (older kernels keep their 200 ms; `ip route … rto_min` sets it per route there).
fn tune(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
    let _ = set_int(
        stream.as_raw_fd(),
        libc::IPPROTO_TCP,
        TCP_RTO_MIN_US,
        CONTROL_RTO_MIN_US,
    );
}

fn listen_on(address: SocketAddrV4, tos: u8) -> io::Result<TcpListener> {
    let socket = socket(tos)?;
    socket.set_reuseaddr(true)?;
    socket.bind(address.into())?;
    socket.listen(1024)
}

async fn write_hello(stream: &mut TcpStream, job: u32, rank: u16) -> io::Result<()> {
    let mut frame = Vec::new();
    Control::Hello {
        version: endhost_core::wire::VERSION,
        job,
        rank,
    }
    .encode(&mut frame);
    stream.write_all(&frame).await
}

/// Reads the peer's HELLO; returns its rank and whatever arrived after it.
async fn read_hello(stream: &mut TcpStream, job: u32) -> Result<(u16, Vec<u8>), String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64];
    loop {
        match Control::decode(&mut buf) {
            Ok(Some(Control::Hello { version, .. })) if version != endhost_core::wire::VERSION => {
                return Err(format!(
                    "speaks wire version {version}, this transport {}: run the same endhost \
                     on every host",
                    endhost_core::wire::VERSION
                ));
            }
            Ok(Some(Control::Hello { job: j, rank, .. })) if j == job => return Ok((rank, buf)),
            Ok(Some(Control::Hello { job: j, .. })) => {
                return Err(format!("belongs to job {j}, not {job}"));
            }
            Ok(Some(other)) => return Err(format!("sent {other:?} before HELLO")),
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed before HELLO".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn write_frames(mut writer: OwnedWriteHalf, mut rx: UnboundedReceiver<Control>) {
    let mut frame = Vec::new();
    while let Some(first) = rx.recv().await {
        frame.clear();
        first.encode(&mut frame);
        // Whatever else is queued goes in the same write.
        while let Ok(next) = rx.try_recv() {
            next.encode(&mut frame);
        }
        if writer.write_all(&frame).await.is_err() {
            return;
        }
    }
}

async fn read_frames<T: From<Incoming>>(
    mut reader: OwnedReadHalf,
    mut buf: Vec<u8>,
    peer: u16,
    incoming: std::sync::mpsc::Sender<T>,
    wake: impl Fn(),
) {
    let mut chunk = vec![0u8; 64 * 1024];
    let why = loop {
        let mut frames = Vec::new();
        let failure = loop {
            match Control::decode(&mut buf) {
                Ok(Some(message)) => frames.push(message),
                Ok(None) => break None,
                Err(e) => break Some(e.to_string()),
            }
        };
        if !frames.is_empty() {
            for message in frames {
                if incoming
                    .send(Incoming::Control { peer, message }.into())
                    .is_err()
                {
                    return;
                }
            }
            wake();
        }
        if let Some(why) = failure {
            break why;
        }
        match reader.read(&mut chunk).await {
            Ok(0) => break "closed the connection".to_string(),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => break e.to_string(),
        }
    };
    let _ = incoming.send(Incoming::Lost { peer, why }.into());
    wake();
}

#[cfg(test)]
mod tests {
    use super::*;
    use endhost_core::wire::MessageId;

    /// A peer that is already up sends its HELLO and its first frames in one write; the
    /// frames behind the HELLO must not be lost.
    #[test]
    fn frames_right_behind_the_hello_are_delivered() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let lower = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let lower_addr = match lower.local_addr().unwrap() {
                SocketAddr::V4(a) => a,
                SocketAddr::V6(_) => unreachable!(),
            };
            let id = MessageId {
                tensor: 1,
                round: 0,
                step: 0,
            };
            let fake_rank0 = tokio::spawn(async move {
                let (mut stream, _) = lower.accept().await.unwrap();
                read_hello(&mut stream, 5).await.unwrap();
                let mut bytes = Vec::new();
                Control::Hello {
                    version: endhost_core::wire::VERSION,
                    job: 5,
                    rank: 0,
                }
                .encode(&mut bytes);
                Control::Ready { id, handle: 9 }.encode(&mut bytes);
                stream.write_all(&bytes).await.unwrap();
                stream
            });
            let (tx, rx) = std::sync::mpsc::channel();
            let config = MeshConfig {
                job: 5,
                rank: 1,
                addresses: vec![lower_addr, SocketAddrV4::new([127, 0, 0, 1].into(), 0)],
                connect_timeout: Duration::from_secs(5),
                tos: 0,
            };
            let _mesh = connect(&config, tx, || {}).await.unwrap();
            let _stream = fake_rank0.await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match rx.try_recv() {
                    Ok(Incoming::Control { peer, message }) => {
                        assert_eq!((peer, message), (0, Control::Ready { id, handle: 9 }));
                        break;
                    }
                    Ok(_) => panic!("unexpected inbound"),
                    Err(_) if Instant::now() < deadline => tokio::task::yield_now().await,
                    Err(e) => panic!("the READY never arrived: {e}"),
                }
            }
        });
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn free_address() -> SocketAddrV4 {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        match probe.local_addr().unwrap() {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => unreachable!(),
        }
    }

    /// Connections that say nothing, or send garbage, while rank 0 waits for its peers
    /// are closed and ignored: the real peer still joins, in time.
    #[test]
    fn stray_connections_during_setup_are_ignored() {
        runtime().block_on(async {
            let addresses = vec![free_address(), free_address()];
            let config = |rank| MeshConfig {
                job: 9,
                rank,
                addresses: addresses.clone(),
                connect_timeout: Duration::from_secs(20),
                tos: 0,
            };
            let (tx0, _rx0) = std::sync::mpsc::channel::<Incoming>();
            let (tx1, _rx1) = std::sync::mpsc::channel::<Incoming>();
            let (c0, c1) = (config(0), config(1));
            let rank0 = tokio::spawn(async move { connect(&c0, tx0, || {}).await });
            tokio::time::sleep(Duration::from_millis(200)).await;
            let _silent = TcpStream::connect(addresses[0]).await.unwrap();
            let mut garbage = TcpStream::connect(addresses[0]).await.unwrap();
            garbage.write_all(&[0xff; 16]).await.unwrap();
            let mut other_job = TcpStream::connect(addresses[0]).await.unwrap();
            write_hello(&mut other_job, 8, 1).await.unwrap();
            let started = Instant::now();
            let rank1 = connect(&c1, tx1, || {}).await;
            assert!(rank1.is_ok(), "{:?}", rank1.err());
            assert!(rank0.await.unwrap().is_ok());
            assert!(started.elapsed() < HELLO_TIMEOUT, "{:?}", started.elapsed());
        });
    }

    /// A stray connection that never says HELLO does not hold rank 0 past its connect
    /// timeout: setup fails in time, naming the rank that never came.
    #[test]
    fn a_silent_stray_does_not_outlast_the_connect_timeout() {
        runtime().block_on(async {
            let config = MeshConfig {
                job: 9,
                rank: 0,
                addresses: vec![free_address(), free_address()],
                connect_timeout: Duration::from_secs(1),
                tos: 0,
            };
            let listen = config.addresses[0];
            let (tx, _rx) = std::sync::mpsc::channel::<Incoming>();
            let started = Instant::now();
            let setup = tokio::spawn(async move { connect(&config, tx, || {}).await });
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _silent = TcpStream::connect(listen).await.unwrap();
            let result = setup.await.unwrap();
            assert!(
                matches!(&result, Err(MeshError::Incomplete { missing, .. }) if missing == &[1]),
                "{:?}",
                result.err()
            );
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{:?}",
                started.elapsed()
            );
        });
    }

    /// A lost control frame is resent after milliseconds, not Linux's 200 ms, where the
    /// kernel lets a socket choose (6.15 and later); older kernels refuse the option.
    #[test]
    fn control_connections_retransmit_after_a_short_floor() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let stream = TcpStream::connect(address).await.unwrap();
            tune(&stream);
            let mut value: libc::c_int = 0;
            let mut len = size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: a live socket, an int and its length.
            let rc = unsafe {
                libc::getsockopt(
                    stream.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    TCP_RTO_MIN_US,
                    (&mut value as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
            if rc == 0 {
                // Kept in jiffies: rounded up to the kernel's tick.
                assert!(
                    (CONTROL_RTO_MIN_US..20_000).contains(&value),
                    "floor {value} µs"
                );
            } else {
                let error = io::Error::last_os_error().raw_os_error();
                assert!(
                    matches!(error, Some(libc::ENOPROTOOPT | libc::EINVAL)),
                    "{error:?}"
                );
                eprintln!("kernel without TCP_RTO_MIN_US: the 200 ms floor stays");
            }
            assert!(stream.nodelay().unwrap());
        });
    }
}

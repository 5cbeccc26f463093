//! The reliable control channel: one TCP connection per pair of ranks (tokio). The
//! higher rank connects to the lower; both open with a HELLO naming job and rank, so a
//! stray connection or another job's process is refused. Frames go both ways as the
//! protocol core asks; a connection that closes or sends nonsense is reported, so the
//! collectives waiting on that rank fail at once instead of timing out.
//!
//! Who a peer is: a rank is believed only from its configured address (the dialer
//! binds its own, the listener compares), and, when the job has a key (the
//! configuration's `key_file`, which `mltctl launch` writes to every host over SSH),
//! only once it proved the key. Both HELLOs carry a fresh nonce; each side then sends
//! an AUTH, HMAC-SHA-256 under the key of its role, the job, both ranks and both
//! nonces, so a proof cannot be replayed to another connection or reflected back.

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
use endhost_core::proto::control::{MAC_LEN, NONCE_LEN};

/// What the control channel tells the datapath thread.
#[derive(Debug)]
pub enum Incoming {
    Control { peer: u16, message: Control },
    Lost { peer: u16, why: String },
}

/// The job's shared secret: every peer proves it has it.
pub type JobKey = std::sync::Arc<[u8]>;

/// Everyone's control address, by rank.
#[derive(Clone)]
pub struct MeshConfig {
    pub job: u32,
    pub rank: u16,
    pub addresses: Vec<SocketAddrV4>,
    /// The job's key, if the job has one.
    pub key: Option<JobKey>,
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
                    handshakes.spawn(answer_hello(stream, from, config.clone(), limit));
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

/// One accepted connection's handshake, within `limit`: its HELLO read and checked
/// (job, version, the rank's address, the key), ours sent.
async fn answer_hello(
    mut stream: TcpStream,
    from: SocketAddr,
    config: MeshConfig,
    limit: Duration,
) -> Result<(u16, TcpStream, Vec<u8>), MeshError> {
    let refused = |why: String| MeshError::Refused { from, why };
    let handshake = async {
        let mut buf = Vec::new();
        let theirs = read_hello(&mut stream, &mut buf, config.job).await?;
        let claimed = config
            .addresses
            .get(usize::from(theirs.rank))
            .ok_or_else(|| format!("claims rank {}, which is not in the job", theirs.rank))?;
        if from.ip() != std::net::IpAddr::V4(*claimed.ip()) {
            return Err(format!(
                "claims rank {}, whose address is {}",
                theirs.rank,
                claimed.ip()
            ));
        }
        // Our HELLO goes out even when the keys do not agree, so the peer can say why.
        let proof = agree_on_key(&config, &theirs);
        let mine = Hello::fresh(&config);
        let mut frames = Vec::new();
        mine.control(&config).encode(&mut frames);
        if let Ok(Some(key)) = proof {
            Control::Auth {
                mac: mac(
                    key,
                    ACCEPTOR,
                    config.job,
                    [config.rank, theirs.rank],
                    [&theirs.nonce, &mine.nonce],
                ),
            }
            .encode(&mut frames);
        }
        stream.write_all(&frames).await.map_err(|e| e.to_string())?;
        if let Some(key) = proof? {
            let expected = mac(
                key,
                DIALER,
                config.job,
                [theirs.rank, config.rank],
                [&mine.nonce, &theirs.nonce],
            );
            check_auth(&mut stream, &mut buf, &expected).await?;
        }
        Ok((theirs.rank, buf))
    };
    match tokio::time::timeout(limit, handshake).await {
        Ok(Ok((peer, rest))) => Ok((peer, stream, rest)),
        Ok(Err(why)) => Err(refused(why)),
        Err(_) => Err(refused(format!("no HELLO within {} ms", limit.as_millis()))),
    }
}

/// A HELLO's fields that matter after it was read.
struct Hello {
    rank: u16,
    nonce: [u8; NONCE_LEN],
    authenticated: bool,
}

impl Hello {
    /// This rank's HELLO, with a fresh nonce.
    fn fresh(config: &MeshConfig) -> Hello {
        let mut nonce = [0u8; NONCE_LEN];
        fill_random(&mut nonce);
        Hello {
            rank: config.rank,
            nonce,
            authenticated: config.key.is_some(),
        }
    }

    fn control(&self, config: &MeshConfig) -> Control {
        Control::Hello {
            version: endhost_core::wire::VERSION,
            job: config.job,
            rank: self.rank,
            nonce: self.nonce,
            authenticated: self.authenticated,
        }
    }
}

/// The key both sides prove, or why they cannot agree on having one.
fn agree_on_key<'a>(config: &'a MeshConfig, theirs: &Hello) -> Result<Option<&'a [u8]>, String> {
    match (&config.key, theirs.authenticated) {
        (Some(key), true) => Ok(Some(key)),
        (None, false) => Ok(None),
        (Some(_), false) => Err(format!(
            "rank {} does not prove the job's key (its configuration has no key_file)",
            theirs.rank
        )),
        (None, true) => Err(format!(
            "rank {} proves a job key, and this rank has none (its configuration has no key_file)",
            theirs.rank
        )),
    }
}

/// What each role's MAC starts with, so that one side's proof is no proof of the other.
const ACCEPTOR: &[u8] = b"mlt-hello-v3 accept";
const DIALER: &[u8] = b"mlt-hello-v3 dial";

/// HMAC-SHA-256 under `key` of the role, the job, the speaker's and the other's rank,
/// and the other's nonce then the speaker's.
fn mac(
    key: &[u8],
    role: &[u8],
    job: u32,
    ranks: [u16; 2],
    nonces: [&[u8; NONCE_LEN]; 2],
) -> [u8; MAC_LEN] {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("any key length");
    mac.update(role);
    mac.update(&job.to_be_bytes());
    for rank in ranks {
        mac.update(&rank.to_be_bytes());
    }
    for nonce in nonces {
        mac.update(nonce);
    }
    mac.finalize().into_bytes().into()
}

/// Reads the peer's AUTH and compares it (in constant time) with `expected`.
async fn check_auth(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    expected: &[u8; MAC_LEN],
) -> Result<(), String> {
    match read_frame(stream, buf).await? {
        Control::Auth { mac } => {
            let same = mac
                .iter()
                .zip(expected)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
            if same {
                Ok(())
            } else {
                Err("its proof of the job's key is wrong (another key, or a replay)".into())
            }
        }
        other => Err(format!(
            "sent {} where its proof of the job's key was due",
            other.name()
        )),
    }
}

/// Fills `out` from the kernel's random source.
fn fill_random(out: &mut [u8]) {
    let mut filled = 0;
    while filled < out.len() {
        // SAFETY: writes at most the rest of `out`.
        let n =
            unsafe { libc::getrandom(out[filled..].as_mut_ptr().cast(), out.len() - filled, 0) };
        if n > 0 {
            filled += n as usize;
        } else if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            panic!("getrandom failed: {}", io::Error::last_os_error());
        }
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
        // From our own control address: the peer believes our rank only from there.
        let own = *config.addresses[usize::from(config.rank)].ip();
        let connected = match socket(config.tos)
            .and_then(|s| s.bind(SocketAddrV4::new(own, 0).into()).map(|()| s))
        {
            Ok(socket) => socket.connect(address.into()).await,
            Err(e) => Err(e),
        };
        match connected {
            Ok(mut stream) => {
                tune(&stream);
                let handshake = dial_hello(&mut stream, config, peer);
                match tokio::time::timeout(Duration::from_secs(5), handshake).await {
                    Ok(Ok(rest)) => return Ok((stream, rest)),
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

/// The dialer's handshake with `peer`: our HELLO, theirs (and their proof of the key,
/// ours after it); returns what arrived behind it.
async fn dial_hello(
    stream: &mut TcpStream,
    config: &MeshConfig,
    peer: u16,
) -> Result<Vec<u8>, String> {
    let mine = Hello::fresh(config);
    let mut frame = Vec::new();
    mine.control(config).encode(&mut frame);
    stream.write_all(&frame).await.map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let theirs = read_hello(stream, &mut buf, config.job).await?;
    if theirs.rank != peer {
        return Err(format!("rank {} answered instead", theirs.rank));
    }
    if let Some(key) = agree_on_key(config, &theirs)? {
        let expected = mac(
            key,
            ACCEPTOR,
            config.job,
            [peer, config.rank],
            [&mine.nonce, &theirs.nonce],
        );
        check_auth(stream, &mut buf, &expected).await?;
        let mut frame = Vec::new();
        Control::Auth {
            mac: mac(
                key,
                DIALER,
                config.job,
                [config.rank, peer],
                [&theirs.nonce, &mine.nonce],
            ),
        }
        .encode(&mut frame);
        stream.write_all(&frame).await.map_err(|e| e.to_string())?;
    }
    Ok(buf)
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

/// Reads one whole frame, keeping in `buf` whatever arrived behind it.
async fn read_frame(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Control, String> {
    let mut chunk = [0u8; 256];
    loop {
        if let Some(frame) = Control::decode(buf).map_err(|e| e.to_string())? {
            return Ok(frame);
        }
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed the connection during the handshake".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads the peer's HELLO (of this job and wire version).
async fn read_hello(stream: &mut TcpStream, buf: &mut Vec<u8>, job: u32) -> Result<Hello, String> {
    match read_frame(stream, buf).await? {
        Control::Hello { version, .. } if version != endhost_core::wire::VERSION => Err(format!(
            "speaks wire version {version}, this transport {}: run the same endhost on every host",
            endhost_core::wire::VERSION
        )),
        Control::Hello {
            job: j,
            rank,
            nonce,
            authenticated,
            ..
        } if j == job => Ok(Hello {
            rank,
            nonce,
            authenticated,
        }),
        Control::Hello { job: j, .. } => Err(format!("belongs to job {j}, not {job}")),
        other => Err(format!("sent {} before HELLO", other.name())),
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
                read_hello(&mut stream, &mut Vec::new(), 5).await.unwrap();
                let mut bytes = hello_frame(5, 0);
                Control::Ready { id, handle: 9 }.encode(&mut bytes);
                stream.write_all(&bytes).await.unwrap();
                stream
            });
            let (tx, rx) = std::sync::mpsc::channel();
            let config = MeshConfig {
                job: 5,
                rank: 1,
                addresses: vec![lower_addr, SocketAddrV4::new([127, 0, 0, 1].into(), 0)],
                key: None,
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

    /// Rank `rank` of job 9 among `addresses`, with `key`, waiting up to `seconds`.
    fn mesh_config(
        addresses: &[SocketAddrV4],
        rank: u16,
        key: Option<JobKey>,
        seconds: u64,
    ) -> MeshConfig {
        MeshConfig {
            job: 9,
            rank,
            addresses: addresses.to_vec(),
            key,
            connect_timeout: Duration::from_secs(seconds),
            tos: 0,
        }
    }

    /// A HELLO of `job` and `rank` without a key.
    fn hello_frame(job: u32, rank: u16) -> Vec<u8> {
        let mut bytes = Vec::new();
        Control::Hello {
            version: endhost_core::wire::VERSION,
            job,
            rank,
            nonce: [1; NONCE_LEN],
            authenticated: false,
        }
        .encode(&mut bytes);
        bytes
    }

    /// A free port on `ip` (loopback).
    fn free_address_on(ip: [u8; 4]) -> SocketAddrV4 {
        let probe = std::net::TcpListener::bind(SocketAddrV4::new(ip.into(), 0)).unwrap();
        match probe.local_addr().unwrap() {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => unreachable!(),
        }
    }

    /// A HELLO claiming rank 1 from an address that is not rank 1's is refused without
    /// an answer; rank 1 from its own address then joins.
    #[test]
    fn a_hello_from_another_address_than_the_ranks_is_refused() {
        runtime().block_on(async {
            let addresses = vec![
                free_address_on([127, 0, 0, 1]),
                free_address_on([127, 0, 0, 2]),
            ];
            let config = |rank| mesh_config(&addresses, rank, None, 20);
            let (tx0, _rx0) = std::sync::mpsc::channel::<Incoming>();
            let (tx1, _rx1) = std::sync::mpsc::channel::<Incoming>();
            let (c0, c1) = (config(0), config(1));
            let rank0 = tokio::spawn(async move { connect(&c0, tx0, || {}).await });
            tokio::time::sleep(Duration::from_millis(100)).await;
            let impostor = TcpSocket::new_v4().unwrap();
            impostor
                .bind(SocketAddrV4::new([127, 0, 0, 5].into(), 0).into())
                .unwrap();
            let mut impostor = impostor.connect(addresses[0].into()).await.unwrap();
            impostor.write_all(&hello_frame(9, 1)).await.unwrap();
            let mut answer = Vec::new();
            let read =
                tokio::time::timeout(Duration::from_secs(5), impostor.read_to_end(&mut answer))
                    .await;
            assert!(
                matches!(read, Ok(Ok(0)) | Ok(Err(_))),
                "{read:?} {answer:?}"
            );
            let rank1 = connect(&c1, tx1, || {}).await;
            assert!(rank1.is_ok(), "{:?}", rank1.err());
            assert!(rank0.await.unwrap().is_ok());
        });
    }

    /// With the job's key, ranks that have it join; a rank with another key, or none,
    /// is refused on both sides, saying why.
    #[test]
    fn ranks_prove_the_jobs_key_and_a_wrong_key_or_none_is_refused() {
        runtime().block_on(async {
            let key: JobKey = std::sync::Arc::from(&b"0123456789abcdef0123456789abcdef"[..]);
            let other: JobKey = std::sync::Arc::from(&b"fedcba9876543210fedcba9876543210"[..]);
            for (second, joins) in [
                (Some(key.clone()), true),
                (Some(other), false),
                (None, false),
            ] {
                let addresses = vec![free_address(), free_address()];
                let config = |rank, key| mesh_config(&addresses, rank, key, 1);
                let (tx0, _rx0) = std::sync::mpsc::channel::<Incoming>();
                let (tx1, _rx1) = std::sync::mpsc::channel::<Incoming>();
                let (c0, c1) = (config(0, Some(key.clone())), config(1, second.clone()));
                let rank0 = tokio::spawn(async move { connect(&c0, tx0, || {}).await });
                let rank1 = connect(&c1, tx1, || {}).await;
                let rank0 = rank0.await.unwrap();
                assert_eq!(rank0.is_ok(), joins, "{:?}", rank0.err());
                match rank1 {
                    Ok(_) => assert!(joins),
                    Err(e) => {
                        assert!(!joins);
                        let why = e.to_string();
                        let expected = if second.is_some() {
                            "proof of the job's key is wrong"
                        } else {
                            "proves a job key, and this rank has none"
                        };
                        assert!(why.contains(expected), "{why}");
                    }
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
            let config = |rank| mesh_config(&addresses, rank, None, 20);
            let (tx0, _rx0) = std::sync::mpsc::channel::<Incoming>();
            let (tx1, _rx1) = std::sync::mpsc::channel::<Incoming>();
            let (c0, c1) = (config(0), config(1));
            let rank0 = tokio::spawn(async move { connect(&c0, tx0, || {}).await });
            tokio::time::sleep(Duration::from_millis(200)).await;
            let _silent = TcpStream::connect(addresses[0]).await.unwrap();
            let mut garbage = TcpStream::connect(addresses[0]).await.unwrap();
            garbage.write_all(&[0xff; 16]).await.unwrap();
            let mut other_job = TcpStream::connect(addresses[0]).await.unwrap();
            other_job.write_all(&hello_frame(8, 1)).await.unwrap();
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
            let config = mesh_config(&[free_address(), free_address()], 0, None, 1);
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

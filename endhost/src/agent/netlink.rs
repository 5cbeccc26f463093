//! Reading and changing the data NIC's kernel state over rtnetlink.
//!
//! Message types are netlink-packet-route's, named through `rtnetlink::packet_route`
//! (rtnetlink re-exports the very version it speaks), so endhost does not depend on
//! netlink-packet-route directly and the two can never disagree on a version.

use std::net::{IpAddr, Ipv4Addr};

use futures_util::TryStreamExt;
use ipnet::Ipv4Net;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage, AddressProtocol};
use rtnetlink::packet_route::link::LinkAttribute;
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol,
};
use rtnetlink::{Handle, LinkUnspec, RouteMessageBuilder};

use super::OWNER;
use endhost_core::addr::MacAddr;
use endhost_core::host::state::{
    Change, Observed, ObservedAddress, ObservedNeighbour, ObservedRoute,
};

#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("cannot open a netlink socket: {0}")]
    Socket(#[source] std::io::Error),
    #[error("this host has no interface {0} (the NIC the inventory names)")]
    NoSuchNic(String),
    #[error("{what}: {source}")]
    Request {
        what: String,
        #[source]
        source: rtnetlink::Error,
    },
}

/// A netlink connection in the calling thread's network namespace, with the data NIC
/// looked up.
pub struct Nic {
    handle: Handle,
    pub index: u32,
}

impl Nic {
    pub async fn open(name: &str) -> Result<Nic, NetlinkError> {
        let (connection, handle, _) = rtnetlink::new_connection().map_err(NetlinkError::Socket)?;
        tokio::spawn(connection);
        let link = handle
            .link()
            .get()
            .match_name(name.to_string())
            .execute()
            .try_next()
            .await;
        match link {
            Ok(Some(link)) => Ok(Nic {
                handle,
                index: link.header.index,
            }),
            // The kernel answers a lookup of a missing name with ENODEV.
            Ok(None) | Err(rtnetlink::Error::NetlinkError(_)) => {
                Err(NetlinkError::NoSuchNic(name.to_string()))
            }
            Err(source) => Err(request(format!("looking up {name}"), source)),
        }
    }

    pub async fn observe(&self) -> Result<Observed, NetlinkError> {
        let mut observed = Observed::default();
        let link = self
            .handle
            .link()
            .get()
            .match_index(self.index)
            .execute()
            .try_next()
            .await
            .map_err(|e| request("reading the NIC", e))?
            .ok_or_else(|| request("reading the NIC", rtnetlink::Error::RequestFailed))?;
        for attribute in &link.attributes {
            match attribute {
                LinkAttribute::Mtu(mtu) => observed.mtu = u16::try_from(*mtu).unwrap_or(u16::MAX),
                LinkAttribute::Address(bytes) => observed.mac = mac_of(bytes),
                _ => {}
            }
        }
        let mut addresses = self
            .handle
            .address()
            .get()
            .set_link_index_filter(self.index)
            .execute();
        while let Some(message) = addresses
            .try_next()
            .await
            .map_err(|e| request("reading addresses", e))?
        {
            if let Some(address) = observed_address(&message) {
                observed.addresses.push(address);
            }
        }
        let mut neighbours = self.handle.neighbours().get().execute();
        while let Some(message) = neighbours
            .try_next()
            .await
            .map_err(|e| request("reading neighbours", e))?
        {
            if message.header.ifindex == self.index
                && let Some(neighbour) = observed_neighbour(&message)
            {
                observed.neighbours.push(neighbour);
            }
        }
        let mut routes = self
            .handle
            .route()
            .get(RouteMessageBuilder::<Ipv4Addr>::new().build())
            .execute();
        while let Some(message) = routes
            .try_next()
            .await
            .map_err(|e| request("reading routes", e))?
        {
            if let Some(route) = observed_route(&message) {
                observed.routes.push(route);
            }
        }
        Ok(observed)
    }

    pub async fn apply(&self, change: Change) -> Result<(), NetlinkError> {
        let what = || format!("{change}");
        let h = &self.handle;
        match change {
            Change::SetMtu { to, .. } => {
                h.link()
                    .set(
                        LinkUnspec::new_with_index(self.index)
                            .mtu(to.into())
                            .build(),
                    )
                    .execute()
                    .await
            }
            Change::AddAddress { net } => {
                let mut add = h
                    .address()
                    .add(self.index, IpAddr::V4(net.addr()), net.prefix_len());
                add.message_mut()
                    .attributes
                    .push(AddressAttribute::Protocol(AddressProtocol::Other(OWNER)));
                add.execute().await
            }
            Change::RemoveAddress { net } => {
                let mut message = AddressMessage::default();
                message.header.family = AddressFamily::Inet;
                message.header.index = self.index;
                message.header.prefix_len = net.prefix_len();
                message
                    .attributes
                    .push(AddressAttribute::Local(IpAddr::V4(net.addr())));
                message
                    .attributes
                    .push(AddressAttribute::Address(IpAddr::V4(net.addr())));
                h.address().del(message).execute().await
            }
            Change::SetNeighbour { ip, mac, .. } => {
                let mut add = h
                    .neighbours()
                    .add(self.index, IpAddr::V4(ip))
                    .link_layer_address(&mac.0)
                    .state(NeighbourState::Permanent)
                    .replace();
                add.message_mut()
                    .attributes
                    .push(NeighbourAttribute::Protocol(RouteProtocol::Other(OWNER)));
                add.execute().await
            }
            Change::RemoveNeighbour { ip, .. } => {
                let mut message = NeighbourMessage::default();
                message.header.family = AddressFamily::Inet;
                message.header.ifindex = self.index;
                message
                    .attributes
                    .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)));
                h.neighbours().del(message).execute().await
            }
            Change::SetRoute { prefix, via, .. } => {
                h.route()
                    .add(route(prefix, via, self.index))
                    .replace()
                    .execute()
                    .await
            }
            Change::RemoveRoute { prefix, via } => {
                h.route()
                    .del(route(prefix, via, self.index))
                    .execute()
                    .await
            }
        }
        .map_err(|e| request(what(), e))
    }
}

fn route(prefix: Ipv4Net, via: Ipv4Addr, index: u32) -> RouteMessage {
    RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(prefix.addr(), prefix.prefix_len())
        .gateway(via)
        .output_interface(index)
        .protocol(RouteProtocol::Other(OWNER))
        .build()
}

fn request(what: impl Into<String>, source: rtnetlink::Error) -> NetlinkError {
    NetlinkError::Request {
        what: what.into(),
        source,
    }
}

fn mac_of(bytes: &[u8]) -> Option<MacAddr> {
    <[u8; 6]>::try_from(bytes).ok().map(MacAddr)
}

fn observed_address(message: &AddressMessage) -> Option<ObservedAddress> {
    if message.header.family != AddressFamily::Inet {
        return None;
    }
    let mut address = None;
    let mut ours = false;
    for attribute in &message.attributes {
        match attribute {
            // IFA_LOCAL is the interface's own address (IFA_ADDRESS is the peer's on
            // point-to-point links).
            AddressAttribute::Local(IpAddr::V4(ip)) => address = Some(*ip),
            AddressAttribute::Address(IpAddr::V4(ip)) if address.is_none() => address = Some(*ip),
            AddressAttribute::Protocol(AddressProtocol::Other(p)) => ours = *p == OWNER,
            _ => {}
        }
    }
    Some(ObservedAddress {
        net: Ipv4Net::new(address?, message.header.prefix_len).ok()?,
        ours,
    })
}

fn observed_neighbour(message: &NeighbourMessage) -> Option<ObservedNeighbour> {
    let mut ip = None;
    let mut mac = None;
    let mut ours = false;
    for attribute in &message.attributes {
        match attribute {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => ip = Some(*a),
            NeighbourAttribute::LinkLayerAddress(bytes) => mac = mac_of(bytes),
            NeighbourAttribute::Protocol(p) => ours = u8::from(*p) == OWNER,
            _ => {}
        }
    }
    Some(ObservedNeighbour {
        ip: ip?,
        mac,
        permanent: message.header.state == NeighbourState::Permanent,
        ours,
    })
}

fn observed_route(message: &RouteMessage) -> Option<ObservedRoute> {
    let mut table = u32::from(message.header.table);
    let mut destination = Ipv4Addr::UNSPECIFIED;
    let mut via = None;
    for attribute in &message.attributes {
        match attribute {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(RouteAddress::Inet(a)) => destination = *a,
            RouteAttribute::Gateway(RouteAddress::Inet(a)) => via = Some(*a),
            _ => {}
        }
    }
    if message.header.address_family != AddressFamily::Inet
        || table != u32::from(RouteHeader::RT_TABLE_MAIN)
    {
        return None;
    }
    Some(ObservedRoute {
        prefix: Ipv4Net::new(destination, message.header.destination_prefix_length).ok()?,
        via,
        ours: u8::from(message.header.protocol) == OWNER,
    })
}

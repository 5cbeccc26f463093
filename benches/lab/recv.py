"""Receives the lab benchmark's UDP traffic for SECONDS on PORT and prints, as JSON,
how many datagrams of each kind arrived with each ECN codepoint, the same per DSCP
("dscp/ecn"), and the probes' one-way delays (sender and receiver share this machine's clock)."""
import json
import socket
import struct
import sys
import time

port, seconds = int(sys.argv[1]), float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(("0.0.0.0", port))
s.settimeout(0.2)
counts, by_dscp, delays = {}, {}, []
end = time.time() + seconds
while time.time() < end:
    try:
        data, ancillary, _, _ = s.recvmsg(2048, 64)
    except socket.timeout:
        continue
    now = time.time()
    tos = ancillary[0][2][0] if ancillary else 0
    kind = data[:5].decode().strip()
    key = "%s/%d" % (kind, tos & 3)
    counts[key] = counts.get(key, 0) + 1
    key = "%d/%d" % (tos >> 2, tos & 3)
    by_dscp[key] = by_dscp.get(key, 0) + 1
    if kind == "probe":
        (sent,) = struct.unpack("!d", data[5:13])
        delays.append(now - sent)
print(json.dumps({"counts": counts, "dscp": by_dscp, "delays": delays}))

"""Sends the lab benchmark's model traffic to DST:PORT for SECONDS: what MLT's queueing
model (Appendix B) assumes arrives at a congested port. Packets of PACKET_BYTES on the
wire leave at Poisson times, LOAD x the port's LINK_MBPS in all; each packet's class is
drawn by the plan's traffic shares (CLASSES is "dscp:share,dscp:share,..."), and a
fraction THETA of them are unimportant (Not-ECT), the rest ECN-capable (ECT(0)). One
socket, so that every packet takes the same path. Prints what it sent, per
"dscp/ecn", as JSON. SEED (optional, default 18) draws the times: senders that share a
port take different seeds."""
import json
import random
import socket
import sys
import time

dst, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
link_mbps, load, theta = float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
packet_bytes = int(sys.argv[7])
classes = [(int(d), float(s)) for d, s in (c.split(":") for c in sys.argv[8].split(","))]

rng = random.Random(int(sys.argv[9]) if len(sys.argv) > 9 else 18)
# PACKET_BYTES is the Ethernet frame (header 14, IPv4 20, UDP 8, payload); on the wire
# it also takes preamble, start, FCS and gap (24 bytes), which the port's rate counts.
payload = b"model" + b"x" * (packet_bytes - 14 - 20 - 8 - 5)
rate = load * link_mbps * 1e6 / ((packet_bytes + 24) * 8)
dscps = [d for d, _ in classes]
shares = [s for _, s in classes]
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tos = None
sent = {}
start = time.perf_counter()
due = start
while True:
    due += rng.expovariate(rate)
    if due - start >= seconds:
        break
    dscp = rng.choices(dscps, shares)[0]
    ecn = 0 if rng.random() < theta else 2
    while time.perf_counter() < due:
        pass
    if (dscp << 2) | ecn != tos:
        tos = (dscp << 2) | ecn
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    sock.sendto(payload, (dst, port))
    key = "%d/%d" % (dscp, ecn)
    sent[key] = sent.get(key, 0) + 1
print(json.dumps(sent))

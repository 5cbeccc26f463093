"""Sends the lab benchmark's traffic to DST:PORT for SECONDS: a bulk flow at BULK_MBPS
with DSCP BULK_DSCP, alternately ECN-capable (ECT(0)) and not (Not-ECT), and a probe
every 10 ms with DSCP PROBE_DSCP carrying its send time. One socket, so that every
packet takes the same path (ECMP hashes the ports). Prints what it sent as JSON."""
import json
import socket
import struct
import sys
import time

dst, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
bulk_mbps, bulk_dscp, probe_dscp = float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])


sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def send(tos, data):
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    sock.sendto(data, (dst, port))


payload = b"bulk " + b"x" * 1395
interval = len(payload) * 8 / (bulk_mbps * 1e6)
sent = {"bulk/2": 0, "bulk/0": 0, "probe/2": 0}
start = time.time()
next_bulk = next_probe = start
n = 0
while time.time() - start < seconds:
    now = time.time()
    if now >= next_probe:
        send((probe_dscp << 2) | 2, b"probe" + struct.pack("!d", now) + b"p" * 80)
        sent["probe/2"] += 1
        next_probe += 0.01
    if now >= next_bulk:
        ecn = 2 if n % 2 == 0 else 0
        send((bulk_dscp << 2) | ecn, payload)
        key = "bulk/%d" % ecn
        sent[key] += 1
        n += 1
        next_bulk += interval
    else:
        time.sleep(max(0.0, min(next_bulk, next_probe) - time.time()))
print(json.dumps(sent))

"""The chaos run's check that there are never two writers, read off the API server's audit log (chaos.py
calls it once the run has quiesced)."""
import json

OPERATOR_USER = "system:serviceaccount:modelpool-system:modelpool-operator"


def audit(path):
    """Never two writers: every write (create, update, patch, delete) of the operator's identity that the API
    server accepted, other than a Lease write, must come from the replica holding the Lease when the request
    arrived, by the Lease writes the API server accepted before that moment."""
    events = []
    with open(path) as f:
        for line in f:
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
    events.sort(key=lambda e: e.get("requestReceivedTimestamp", ""))
    lease_changes = []  # (stageTimestamp, holder replica letter or "")
    writes = []
    codes = {}
    for e in events:
        if e.get("user", {}).get("username") != OPERATOR_USER:
            continue
        groups = e["user"].get("groups", [])
        who = next((g[len("chaos:replica-"):] for g in groups if g.startswith("chaos:replica-")), None)
        if who is None:  # the test's own checks under the operator's name (kubectl auth can-i), not a replica
            continue
        code = e.get("responseStatus", {}).get("code", 0)
        codes[str(code)] = codes.get(str(code), 0) + 1
        ref = e.get("objectRef", {})
        if e.get("verb") not in ("create", "update", "patch", "delete"):
            continue
        if ref.get("resource") == "leases":
            if 200 <= code < 300:
                hi = ((e.get("requestObject") or {}).get("spec") or {}).get("holderIdentity") or ""
                holder = hi[len("replica-")] if hi.startswith("replica-") else ""
                lease_changes.append((e["stageTimestamp"], holder))
            continue
        if 200 <= code < 300:
            writes.append((e["requestReceivedTimestamp"], who, e["verb"], ref.get("resource"),
                           ref.get("subresource", ""), ref.get("name")))
    lease_changes.sort()
    bad = []
    k, holder = 0, ""
    for w in sorted(writes):
        while k < len(lease_changes) and lease_changes[k][0] <= w[0]:
            holder = lease_changes[k][1]
            k += 1
        if w[1] != holder:
            bad.append("write by replica %s while the Lease was %s's: %s" % (w[1], holder or "nobody", " ".join(map(str, w))))
    return {"writes": len(writes), "lease_writes": len(lease_changes), "codes": codes,
            "writers": sorted({w[1] for w in writes})}, bad

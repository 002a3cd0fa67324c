import Foundation
import LANSyncCore
import LANSyncStore

/// LANSync's export format: JSON Lines, one object per line, so exports stream in and out with
/// bounded memory and stay readable with `jq` and `grep`.
///
/// ```
/// {"type":"header","format":"lansync-export","version":1,"exported_at":…,"device_id":…,"replica_id":…}
/// {"type":"entry","id":…,"stream":…,"device_id":…,"replica_id":…,"counter":…,"hlc":"ms.logical","time":…,"wall_ms":…,"payload":{…}}
/// {"type":"preference","key":…,"device_id":…,"replica_id":…,"counter":…,"hlc":…,"time":…,"wall_ms":…,"value":…}
/// {"type":"row","table":…,"key":[…],"key_bytes":"<base64>","exists":true,"values":{…},"state":"<base64>"}
/// {"type":"end","entries":N,"preferences":M,"rows":R,"digest":…,"version_vector":{"<replica>":counter,…}}
/// ```
///
/// A `row` is an app-table row as this replica holds it, deleted ones included (their delete
/// must reach everyone): `state` is its CRDT state in canonical bytes (docs/protocol.md §6),
/// and `key_bytes` its key's canonical bytes: what an import merges; `key` and `values` are there
/// to read (BLOBs in base64).
///
/// `payload` and `value` are always the last member of their line and are copied byte for byte,
/// so an export imported elsewhere has the same digest. An unset preference has `"unset":true`
/// and no value. The `end` line makes a truncated file detectable: without it, or with other
/// counts, an import writes nothing.
package enum ExportFile {
    package static let format = "lansync-export"
    package static let version = 1

    /// Writes the whole replica, in one consistent read, to `sink`. Returns the counts written.
    package static func write(
        _ node: LANSyncNode,
        to sink: (String) throws -> Void,
        progress: (Int) -> Void = { _ in }
    ) throws -> (entries: Int, preferences: Int, rows: Int) {
        let status = try node.status()
        try sink(
            line([
                ("type", quoted("header")), ("format", quoted(format)), ("version", "\(version)"),
                ("exported_at", quoted(Timestamps.iso8601(milliseconds: Int64(Timestamps.nowMilliseconds())))),
                ("device_id", quoted(node.deviceID.description)), ("replica_id", quoted(node.replicaID.description)),
            ])
        )
        var entries = 0
        var preferences = 0
        var rows = 0
        let vector = try node.store.forEachRow(
            entry: { entry in
                try sink(line(fields(of: entry)))
                entries += 1
                if entries % 1_000 == 0 { progress(entries) }
            },
            preference: { write in
                try sink(line(fields(of: write)))
                preferences += 1
            },
            row: { key, state in
                try sink(line(fields(of: key, state)))
                rows += 1
            }
        )
        try sink(
            line([
                ("type", quoted("end")), ("entries", "\(entries)"), ("preferences", "\(preferences)"),
                ("rows", "\(rows)"),
                ("digest", quoted(status.digest.description)), ("version_vector", json(vector)),
            ])
        )
        return (entries, preferences, rows)
    }

    package static func fields(of key: RowKey, _ state: RowState) -> [(String, String)] {
        [
            ("type", quoted("row")), ("table", quoted(key.table)),
            ("key", "[" + key.primaryKey.map(json).joined(separator: ",") + "]"),
            ("key_bytes", quoted(Data(SQLValue.keyBytes(key.primaryKey)).base64EncodedString())),
            ("exists", "\(state.exists)"),
            ("values", object(state.values.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) })),
            ("state", quoted(Data(state.canonicalBytes).base64EncodedString())),
        ]
    }

    /// An SQL value as JSON, to read: numbers, strings, null; BLOBs as base64 strings.
    package static func json(_ value: SQLValue) -> String {
        switch value {
        case .null: return "null"
        case .integer(let number): return "\(number)"
        case .realBits(let bits):
            let number = Double(bitPattern: bits)
            return number.isFinite ? "\(number)" : "null"
        case .text(let text): return quoted(text)
        case .blob(let bytes): return quoted(Data(bytes).base64EncodedString())
        }
    }

    package static func fields(of entry: Entry) -> [(String, String)] {
        [
            ("type", quoted("entry")), ("id", quoted(entry.id)), ("stream", quoted(entry.stream)),
            ("device_id", quoted(entry.originDevice.description)),
            ("replica_id", quoted(entry.dot.replica.description)),
            ("counter", "\(entry.dot.counter)"), ("hlc", quoted(entry.hlc.description)),
            ("time", quoted(Timestamps.iso8601(milliseconds: entry.wallMilliseconds))),
            ("wall_ms", "\(entry.wallMilliseconds)"), ("payload", entry.payload),
        ]
    }

    package static func fields(of write: PreferenceWrite) -> [(String, String)] {
        var fields: [(String, String)] = [
            ("type", quoted("preference")), ("key", quoted(write.key)),
            ("device_id", quoted(write.originDevice.description)),
            ("replica_id", quoted(write.dot.replica.description)),
            ("counter", "\(write.dot.counter)"), ("hlc", quoted(write.hlc.description)),
            ("time", quoted(Timestamps.iso8601(milliseconds: write.wallMilliseconds))),
            ("wall_ms", "\(write.wallMilliseconds)"),
        ]
        if let value = write.value { fields.append(("value", value)) } else { fields.append(("unset", "true")) }
        return fields
    }

    /// Members already encoded as JSON values, in order, as one line.
    static func line(_ members: [(String, String)]) -> String { object(members) + "\n" }

    /// Members already encoded as JSON values, in order, as one compact JSON object.
    package static func object(_ members: [(String, String)]) -> String {
        "{" + members.map { "\(quoted($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }

    /// A version vector as a JSON object: replica ID (hex) → counter, in replica order.
    package static func json(_ vector: VersionVector) -> String {
        object(vector.counters.sorted { $0.key < $1.key }.map { ($0.key.description, "\($0.value)") })
    }

    /// A JSON string literal.
    package static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

extension HybridTimestamp {
    /// Parses the `ms.logical` form that `description` prints.
    init?(text: String) {
        let parts = text.split(separator: ".")
        guard parts.count == 2, let physical = UInt64(parts[0]), physical < (1 << 48), let logical = UInt16(parts[1])
        else { return nil }
        self.init(physicalMilliseconds: physical, logical: logical)
    }
}

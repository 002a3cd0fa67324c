import Foundation
import LANSyncCore
import LANSyncStore

/// Writes entries as CSV (RFC 4180) for spreadsheets: `id,time,device_id` (and `stream` when
/// several streams are exported), then one column per top-level payload field, in name order.
///
/// Strings appear as plain text, numbers and booleans as written, nested objects and arrays as
/// compact JSON. A text cell that a spreadsheet would run as a formula (starting with `=`, `+`,
/// `-`, `@`) is prefixed with `'`, so an exported log cannot execute anything on a therapist's machine.
package enum CSVExport {
    package static func write(
        _ node: LANSyncNode,
        stream: String?,
        to sink: (String) throws -> Void
    ) throws -> Int {
        let query = EntryQuery(stream: stream)
        // First pass: the union of payload fields, for the header.
        var fields = Set<String>()
        var scalarPayloads = false
        try node.store.forEachEntry(query) { entry in
            if let object = try? JSONSerialization.jsonObject(with: Data(entry.payload.utf8)) as? [String: Any] {
                fields.formUnion(object.keys)
            } else {
                scalarPayloads = true
            }
        }
        let columns = fields.sorted()
        var header = ["id", "time", "device_id"]
        if stream == nil { header.append("stream") }
        // A payload field named like a fixed column gets a prefix, so no two columns share a name.
        let fixed: Set = ["id", "time", "device_id", "stream", "payload"]
        header += columns.map { fixed.contains($0) ? "payload." + $0 : $0 }
        if scalarPayloads { header.append("payload") }
        try sink(header.map(cell).joined(separator: ",") + "\r\n")
        var count = 0
        try node.store.forEachEntry(query) { entry in
            var row = [
                entry.id, Timestamps.iso8601(milliseconds: entry.wallMilliseconds), entry.originDevice.description,
            ]
            if stream == nil { row.append(entry.stream) }
            let object = try? JSONSerialization.jsonObject(with: Data(entry.payload.utf8)) as? [String: Any]
            for column in columns { row.append(object?[column].map(text(of:)) ?? "") }
            if scalarPayloads { row.append(object == nil ? entry.payload : "") }
            try sink(row.map(cell).joined(separator: ",") + "\r\n")
            count += 1
        }
        return count
    }

    /// A JSON value as a spreadsheet cell's text.
    static func text(of value: Any) -> String {
        if value is NSNull { return "" }
        if let string = value as? String { return string }
        guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys])
        else { return "\(value)" }
        return String(decoding: data, as: UTF8.self)
    }

    /// One CSV cell: quoted when it holds a comma, quote or line break; formula-like text defused.
    package static func cell(_ text: String) -> String {
        var value = text
        if let first = value.first, "=+-@".contains(first), Double(value) == nil { value = "'" + value }
        if value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) {
            return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        }
        return value
    }
}

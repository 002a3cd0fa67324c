import Foundation
package import LANSyncCore
import LANSyncStore

/// Reads an export file (see `ExportFile`) into a node, all or nothing.
package enum ImportFile {
    package struct Report: Sendable {
        package let entriesRead: Int
        package let preferencesRead: Int
        package let rowsRead: Int
        package let outcome: MergeOutcome
    }

    /// Imports the export at `path` in one transaction. Any problem — unreadable file, a line
    /// that is not a valid record, a missing or mismatched `end` line (a truncated file) — throws
    /// with the line number, and nothing is written.
    /// `progress` gets the records read so far and the fraction of the file read.
    package static func run(
        _ path: String,
        into node: LANSyncNode,
        progress: (Int, Double) -> Void = { _, _ in }
    )
        throws(LANSyncError) -> Report
    {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw LANSyncError(.invalidInput, "\(path) is a directory; give the path of an export file")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            let exists = FileManager.default.fileExists(atPath: path)
            throw LANSyncError(
                .invalidInput,
                exists ? "cannot read \(path): permission denied" : "no file at \(path); give the path of an export"
            )
        }
        defer { try? handle.close() }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
        let lines = LineReader(handle: handle)
        var entries = 0
        var preferences = 0
        var rows = 0
        do {
            let (_, outcome) = try node.store.importing { session in
                var lineNumber = 0
                var sawHeader = false
                var sawEnd = false
                while let line = try lines.next() {
                    lineNumber += 1
                    let fail = { (reason: String) in
                        LANSyncError(.invalidInput, "\(path), line \(lineNumber): \(reason); nothing was imported")
                    }
                    if line.isEmpty { continue }
                    if sawEnd { throw fail("text after the end line") }
                    guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                        let type = object["type"] as? String
                    else { throw fail("not a LANSync export record (a JSON object with a \"type\")") }
                    if !sawHeader {
                        guard type == "header", object["format"] as? String == ExportFile.format else {
                            throw fail("this is not a LANSync export (it does not start with a header line)")
                        }
                        guard (object["version"] as? Int) == ExportFile.version else {
                            throw fail("export version \(object["version"] ?? "?") is not supported; upgrade lansync")
                        }
                        sawHeader = true
                        continue
                    }
                    switch type {
                    case "entry":
                        let entry = try Self.entry(object, line: line, fail: fail)
                        try session.merge(entry)
                        entries += 1
                        if entries % 1_000 == 0 {
                            let read = Double(handle.offsetInFile)
                            progress(entries, size.map { $0 > 0 ? min(1, read / Double($0)) : 1 } ?? 0)
                        }
                    case "preference":
                        try session.merge(try Self.preference(object, line: line, fail: fail))
                        preferences += 1
                    case "row":
                        for change in try Self.rowChanges(object, fail: fail) { try session.merge(change) }
                        rows += 1
                    case "end":
                        guard object["entries"] as? Int == entries, object["preferences"] as? Int == preferences,
                            (object["rows"] as? Int ?? 0) == rows
                        else {
                            throw fail(
                                "the end line counts \(object["entries"] ?? "?") entries and "
                                    + "\(object["preferences"] ?? "?") preferences, the file holds \(entries) and \(preferences)"
                            )
                        }
                        guard let counters = object["version_vector"] as? [String: Any] else {
                            throw fail("the end line has no version_vector")
                        }
                        var vector = VersionVector()
                        for (key, value) in counters {
                            guard let replica = ReplicaID(hex: key), let counter = value as? Int, counter >= 0 else {
                                throw fail("bad version_vector member \(key)")
                            }
                            vector[replica] = UInt64(counter)
                        }
                        session.cover(vector)
                        sawEnd = true
                    default:
                        throw fail("unknown record type '\(type)'")
                    }
                }
                if !sawHeader {
                    throw LANSyncError(.invalidInput, "\(path) is empty; give the path of a LANSync export")
                }
                if !sawEnd {
                    throw LANSyncError(
                        .invalidInput,
                        "\(path) ends after line \(lineNumber) without its end line: the file is truncated; "
                            + "export it again. Nothing was imported"
                    )
                }
            }
            return Report(entriesRead: entries, preferencesRead: preferences, rowsRead: rows, outcome: outcome)
        } catch let error as LANSyncError {
            throw error
        } catch let error as StoreError {
            throw LANSyncNode.translate(error)
        } catch {
            throw LANSyncError(
                .invalidInput,
                "cannot read \(path) (\(error.localizedDescription)); nothing was imported"
            )
        }
    }

    /// The raw JSON text of the last member `name` of a line written by `ExportFile`.
    static func rawLastMember(_ name: String, of line: String) -> String? {
        guard let range = line.range(of: ",\"\(name)\":"), line.hasSuffix("}") else { return nil }
        return String(line[range.upperBound..<line.index(before: line.endIndex)])
    }

    static func common(
        _ object: [String: Any],
        fail: (String) -> LANSyncError
    ) throws -> (
        DeviceID, Dot, HybridTimestamp, Int64
    ) {
        guard let deviceText = object["device_id"] as? String, let device = DeviceID(deviceText) else {
            throw fail("missing or malformed device_id")
        }
        guard let replicaText = object["replica_id"] as? String, let replica = ReplicaID(hex: replicaText) else {
            throw fail("missing or malformed replica_id")
        }
        guard let counter = object["counter"] as? Int, counter > 0 else { throw fail("missing or malformed counter") }
        guard let hlcText = object["hlc"] as? String, let hlc = HybridTimestamp(text: hlcText) else {
            throw fail("missing or malformed hlc")
        }
        guard let wall = object["wall_ms"] as? Int else { throw fail("missing or malformed wall_ms") }
        return (device, Dot(replica: replica, counter: UInt64(counter)), hlc, Int64(wall))
    }

    static func entry(_ object: [String: Any], line: String, fail: (String) -> LANSyncError) throws -> Entry {
        guard let id = object["id"] as? String else { throw fail("entry without an id") }
        guard let stream = object["stream"] as? String else { throw fail("entry \(id) has no stream") }
        let (device, dot, hlc, wall) = try common(object, fail: fail)
        guard let payload = rawLastMember("payload", of: line) else {
            throw fail("entry \(id): the payload must be the line's last member")
        }
        let entry = Entry(
            id: id,
            stream: stream,
            originDevice: device,
            dot: dot,
            hlc: hlc,
            wallMilliseconds: wall,
            payload: payload
        )
        // The same rules as for rows from a peer: names, compact JSON, size.
        if let problem = entry.problem() { throw fail(problem) }
        return entry
    }

    /// An app-table row's state, as the changes that rebuild it, each checked as a peer's would be.
    static func rowChanges(_ object: [String: Any], fail: (String) -> LANSyncError) throws -> [RowChange] {
        guard let table = object["table"] as? String, !table.isEmpty else { throw fail("row without a table") }
        guard let text = object["state"] as? String, let bytes = Data(base64Encoded: text) else {
            throw fail("row of \(table) without a state (base64)")
        }
        guard let keyText = object["key_bytes"] as? String, let keyBytes = Data(base64Encoded: keyText),
            let values = try? SQLValue.key(from: [UInt8](keyBytes))
        else { throw fail("row of \(table) without a readable key_bytes") }
        let state: RowState
        do {
            state = try RowState(canonicalBytes: [UInt8](bytes))
        } catch {
            throw fail("row of \(table): the state does not read (\(error))")
        }
        let key = RowKey(table: table, primaryKey: values)
        let changes = state.changes(key: key)
        for change in changes { if let problem = change.problem() { throw fail(problem) } }
        return changes
    }

    static func preference(
        _ object: [String: Any],
        line: String,
        fail: (String) -> LANSyncError
    ) throws
        -> PreferenceWrite
    {
        guard let key = object["key"] as? String else { throw fail("preference without a key") }
        let (device, dot, hlc, wall) = try common(object, fail: fail)
        var value: String?
        if object["unset"] as? Bool != true {
            guard let raw = rawLastMember("value", of: line) else {
                throw fail("preference \(key): the value must be the line's last member")
            }
            value = raw
        }
        let write = PreferenceWrite(
            key: key,
            value: value,
            originDevice: device,
            dot: dot,
            hlc: hlc,
            wallMilliseconds: wall
        )
        if let problem = write.problem() { throw fail(problem) }
        return write
    }
}

/// Reads a file line by line in 64 KiB chunks, so a large import never sits whole in memory.
final class LineReader {
    private let handle: FileHandle
    private var buffer = [UInt8]()
    private var position = 0
    private var finished = false

    init(handle: FileHandle) { self.handle = handle }

    func next() throws -> String? {
        while true {
            if let newline = buffer[position...].firstIndex(of: 0x0A) {
                defer { position = newline + 1 }
                return String(decoding: buffer[position..<newline], as: UTF8.self)
            }
            if finished {
                guard position < buffer.count else { return nil }
                defer { position = buffer.count }
                return String(decoding: buffer[position...], as: UTF8.self)
            }
            // Drop consumed bytes before reading more, so the buffer holds about one chunk.
            buffer.removeSubrange(0..<position)
            position = 0
            let chunk = try handle.read(upToCount: 64 * 1024) ?? Data()
            if chunk.isEmpty { finished = true } else { buffer.append(contentsOf: chunk) }
        }
    }
}

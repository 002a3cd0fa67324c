import ArgumentParser
import Foundation
import LANSync
import LANSyncAgent

struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Append to and list streams: append-only logs such as symbol_taps or sessions.",
        subcommands: [Append.self, List.self]
    )

    struct Append: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Append an entry (a JSON payload) to a stream and print its id.",
            discussion: """
                The payload is the JSON argument, or standard input when it is left out. The write is durable when the command returns. With --id, appending the same id again returns the entry already held instead of adding a second one: retries are safe.

                With --lines, every line of standard input is one JSON payload; all lines are checked first (a bad line is reported with its number and nothing is written), then appended in commits of 10,000, and one id is printed per line. If a commit fails (a full disk, say), the lines committed before it keep their printed ids, and the error says which input lines were not appended, so they can be appended again.

                Examples:
                  lansync log append symbol_taps '{"symbol":"more","grid":[2,3]}'
                  echo '{"phrase":"I want juice"}' | lansync log append phrases
                  lansync log append sessions '{"minutes":25}' --id session-2026-11-21-am
                  jq -c '.[]' taps.json | lansync log append symbol_taps --lines
                """
        )

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The stream: lowercase letters, digits, '_', '-', '.'.") var stream: String
        @Argument(help: "The payload, as JSON. Read from standard input when left out.") var json: String?
        @Option(help: "Your own id for the entry (for idempotent retries).") var id: String?
        @Flag(help: "Read one JSON payload per line from standard input.") var lines = false

        func validate() throws {
            if let problem = Names.streamProblem(stream) { throw ValidationError(problem) }
            if let id, let problem = Names.entryIDProblem(id) { throw ValidationError(problem) }
            if lines && json != nil {
                throw ValidationError("--lines reads payloads from standard input; drop the JSON argument")
            }
            if lines && id != nil { throw ValidationError("--id names one entry; it cannot be used with --lines") }
        }

        func run() async throws {
            if lines { return try await appendLines() }
            let payload: String
            if let json {
                payload = json
            } else {
                guard isatty(STDIN_FILENO) == 0 else {
                    throw ValidationError("give the payload as an argument, or pipe it on standard input")
                }
                payload = try await reportingErrors { () throws(LANSyncError) in
                    try StrictUTF8.decode(FileHandle.standardInput.readDataToEndOfFile(), "standard input")
                }
            }
            let entry = try await reportingErrors {
                let node = try global.openNode()
                return try await node.append(to: stream, payload: payload, id: id)
            }
            Output().line(entry.id)
            await ControlClient.kick(global.dataDirectory)
        }

        /// Checks every line, then appends them in commits of `batch` entries.
        func appendLines() async throws {
            let node = try await reportingErrors { try global.openNode() }
            var requests = [AppendRequest]()
            /// The input line each request came from (blank lines are skipped), for error reports.
            var lineOf = [Int]()
            var number = 0
            let input = FileHandle.standardInput
            var pending = [UInt8]()
            var finished = false
            func take(_ line: ArraySlice<UInt8>) throws {
                number += 1
                do {
                    let text = try StrictUTF8.decode(line, "it", saying: false)
                    guard !text.allSatisfy(\.isWhitespace) else { return }
                    requests.append(try LANSyncNode.validated(AppendRequest(stream: stream, payload: text)))
                    lineOf.append(number)
                } catch {
                    note("lansync: error: line \(number): \(error.message); nothing was written")
                    throw ExitCode(1)
                }
            }
            while !finished {
                let chunk = input.readData(ofLength: 256 * 1024)
                if chunk.isEmpty { finished = true } else { pending.append(contentsOf: chunk) }
                var start = 0
                while let newline = pending[start...].firstIndex(of: 0x0A) {
                    try take(pending[start..<newline])
                    start = newline + 1
                }
                pending.removeSubrange(0..<start)
                if finished && !pending.isEmpty { try take(pending[...]) }
            }
            guard !requests.isEmpty else {
                note("lansync: nothing to append: standard input held no payloads")
                return
            }
            let out = Output()
            let batch = 10_000
            var index = 0
            while index < requests.count {
                let end = min(index + batch, requests.count)
                let entries: [Entry]
                do {
                    entries = try await node.append(Array(requests[index..<end]))
                } catch {
                    // Batches before this one are committed (their ids are printed); this one and
                    // the rest are not: say exactly which lines, so the rest can be appended again.
                    out.flush()
                    if index > 0 { await ControlClient.kick(global.dataDirectory) }
                    let committed =
                        index == 0
                        ? "nothing was appended"
                        : "the first \(counted(index, "entry", "entries")) (input lines 1–\(lineOf[index - 1])) "
                            + "were appended and their ids printed above"
                    note(
                        "lansync: error: \(error.message)\nlansync: \(committed); the remaining "
                            + "\(counted(requests.count - index, "entry", "entries")) (input lines \(lineOf[index])–"
                            + "\(lineOf[requests.count - 1])) were not; append those lines again once the problem is fixed "
                            + "(e.g. `tail -n +\(lineOf[index]) FILE | lansync log append \(stream) --lines`)"
                    )
                    throw ExitCode(1)
                }
                for entry in entries { out.line(entry.id) }
                index = end
            }
            out.flush()
            await ControlClient.kick(global.dataDirectory)
            note("appended \(counted(requests.count, "entry", "entries")) to \(stream)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List entries, oldest first.",
            discussion: """
                Times are the wall-clock time of the write on its device, in UTC.

                --json prints one object per line: id, stream, device_id, replica_id, counter, hlc, time (ISO 8601 UTC), wall_ms, payload.

                Examples:
                  lansync log list
                  lansync log list symbol_taps --since 2026-11-21T08:00:00Z
                  lansync log list sessions --json | jq .payload
                """
        )

        @OptionGroup var global: GlobalOptions
        @Argument(help: "Only this stream.") var stream: String?
        @Option(help: "Only entries written at or after this time (ISO 8601, e.g. 2026-11-21 or 2026-11-21T08:00:00Z).")
        var since: String?
        @Option(help: "Only entries written before this time (ISO 8601).") var until: String?
        @Option(help: "At most this many entries.") var limit: Int?
        @Flag(help: "One JSON object per line.") var json = false

        func validate() throws {
            if let stream, let problem = Names.streamProblem(stream) { throw ValidationError(problem) }
            for (name, value) in [("--since", since), ("--until", until)] {
                if let value, Timestamps.milliseconds(iso8601: value) == nil {
                    throw ValidationError("\(name) '\(value)' is not an ISO 8601 time; write e.g. 2026-11-21T08:00:00Z")
                }
            }
            if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
        }

        func run() async throws {
            let node = try await reportingErrors { try global.openNode() }
            let query = EntryQuery(
                stream: stream,
                since: since.flatMap(Timestamps.milliseconds(iso8601:)),
                until: until.flatMap(Timestamps.milliseconds(iso8601:)),
                limit: limit
            )
            let out = Output()
            let me = node.deviceID
            try await reportingErrors {
                do {
                    try node.store.forEachEntry(query) { entry in
                        if json {
                            out.line(ExportFile.fields(of: entry).dropFirst().map { $0 }.jsonObject)
                        } else {
                            let device =
                                entry.originDevice == me
                                ? "this device" : String(entry.originDevice.description.prefix(7))
                            out.line(
                                "\(Timestamps.iso8601(milliseconds: entry.wallMilliseconds))  \(entry.stream)  \(device)  \(entry.payload)"
                            )
                        }
                    }
                } catch let error as StoreError {
                    throw LANSyncError(.storage, error.message)
                }
            }
        }
    }
}

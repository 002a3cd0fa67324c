import ArgumentParser
import Foundation
import LANSync
import LANSyncAgent

struct Pref: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set, read and unset preferences: JSON values where the last writer wins across devices.",
        discussion: """
            Keys are '/'-separated names such as device/name, caregiver/active or controls/slider/sensitivity, of letters, digits, '_', '-' and '.'. They are case-insensitive: game.L20 and game.l20 are one key, stored, synced and listed in lowercase. When two devices change a preference while apart, the later write (by hybrid logical clock) wins on every device once they meet.
            """,
        subcommands: [Set.self, Get.self, List.self, Unset.self]
    )

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a preference to a JSON value.",
            discussion: """
                Examples:
                  lansync pref set controls/slider/sensitivity 0.7
                  lansync pref set caregiver/active '"dad"'
                  lansync pref set board/layout '{"rows":4,"columns":6}'
                """
        )
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key, e.g. controls/slider/sensitivity.") var key: String
        @Argument(help: "The value as JSON: a string needs its quotes, e.g. '\"dad\"'.") var json: String

        func validate() throws {
            if let problem = Names.appKeyProblem(key) { throw ValidationError(problem) }
        }

        func run() async throws {
            try await reportingErrors {
                let node = try global.openNode()
                try await node.set(key, to: json)
            }
            await ControlClient.kick(global.dataDirectory)
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a preference's value as JSON; exit 1 when it is not set.",
            discussion: """
                Examples:
                  lansync pref get controls/slider/sensitivity
                  lansync pref get caregiver/active --json
                """
        )
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String
        @Flag(help: "Print an object with key, value, time, device_id and hlc.") var json = false

        func validate() throws {
            if let problem = Names.appKeyProblem(key) { throw ValidationError(problem) }
        }

        func run() async throws {
            let write = try await reportingErrors {
                let node = try global.openNode()
                do { return try node.store.preference(key: Names.foldedKey(key)) } catch {
                    throw LANSyncError(.storage, "\(error)")
                }
            }
            guard let write, write.value != nil else {
                note("lansync: \(key) is not set")
                throw ExitCode(1)
            }
            Output().line(json ? preferenceJSON(write) : write.value!)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List preferences and their values.",
            discussion: """
                --json prints one object per line: key, value (or "unset": true), device_id, replica_id, counter, hlc, time, wall_ms.

                Examples:
                  lansync pref list
                  lansync pref list --all --json
                """
        )
        @OptionGroup var global: GlobalOptions
        @Flag(help: "One JSON object per line.") var json = false
        @Flag(help: "Include unset keys (tombstones).") var all = false

        func run() async throws {
            let writes = try await reportingErrors {
                try global.openNode().preferences(includingUnset: all)
            }
            let out = Output()
            if json {
                for write in writes { out.line(preferenceJSON(write)) }
            } else {
                for line in aligned(writes.map { [$0.key, $0.value ?? "(unset)"] }) { out.line(line) }
            }
        }
    }

    struct Unset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unset a preference on every device of the group.",
            discussion: """
                Unsetting writes a tombstone, which wins over older values the way any later write does.

                Example:
                  lansync pref unset caregiver/active
                """
        )
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The key.") var key: String

        func validate() throws {
            if let problem = Names.appKeyProblem(key) { throw ValidationError(problem) }
        }

        func run() async throws {
            try await reportingErrors {
                let node = try global.openNode()
                try await node.unset(key)
            }
            await ControlClient.kick(global.dataDirectory)
        }
    }
}

/// A preference as one JSON object (the export record without its type).
func preferenceJSON(_ write: PreferenceWrite) -> String {
    ExportFile.fields(of: write).dropFirst().map { $0 }.jsonObject
}

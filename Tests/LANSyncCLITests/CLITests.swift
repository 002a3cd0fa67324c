import Foundation
import LANSyncTestSupport
import Testing

@Suite(.serialized) struct IdentityCLITests {
    @Test func reinstallKeepsTheDeviceIDWithANewReplicaID() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let first = try await cli.ok(["init", "--name", "home-desktop"])
        #expect(first.contains("created a new identity"))
        let before = try await cli.status()
        let again = try await cli.ok(["init", "--name", "other"])
        #expect(again.contains("nothing changed"))
        #expect(try await cli.status()["replica_id"] as? String == before["replica_id"] as? String)
        #expect(try await cli.status()["name"] as? String == "home-desktop")
        let permissions =
            try FileManager.default.attributesOfItem(atPath: cli.dataDir("a") + "/identity.json")[.posixPermissions]
            as? Int
        #expect(permissions == 0o600)
        // Reinstall: the whole data directory is gone.
        try FileManager.default.removeItem(atPath: cli.dataDir("a"))
        try await cli.ok(["init"])
        let after = try await cli.status()
        #expect(after["device_id"] as? String == before["device_id"] as? String)
        #expect(after["replica_id"] as? String != before["replica_id"] as? String)
        // The global option also works before the command's name.
        let hoisted = try await cli.run(["--data-dir", cli.dataDir("a"), "status", "--json"], node: nil)
        #expect(hoisted.status == 0 && hoisted.stdout.contains(after["replica_id"] as! String))
        // The machine ID itself never shows.
        let id = try await cli.ok(["id", "--json"])
        #expect(!id.contains("0123456789abcdef"))
        #expect(id.contains("\"device_id_source\":\"machine-id\""))
    }

    @Test func missingMachineIDFallsBackToARandomIDAndSaysSo() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let result = try await cli.run(["init"], environment: ["LANSYNC_MACHINE_ID_FILE": cli.root + "/absent"])
        #expect(result.status == 0)
        #expect(result.stderr.contains("random device ID"))
        #expect(try await cli.ok(["id", "--json"]).contains("\"device_id_source\":\"random\""))
    }

    @Test func commandsOnAnUninitialisedDirectorySayToRunInitAndCreateNothing() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        for arguments in [["status"], ["log", "list"], ["log", "append", "taps", "{}"], ["pref", "list"], ["id"]] {
            let result = try await cli.run(arguments, node: "empty")
            #expect(result.status != 0)
            #expect(result.stderr.contains("lansync init"), "\(arguments): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: cli.dataDir("empty")))
    }
}

@Suite(.serialized) struct LogAndPrefCLITests {
    @Test func appendListAndIdempotentRetry() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init"])
        let id = try await cli.ok(["log", "append", "symbol_taps", "{\"symbol\":\"more\",\"grid_position\":[2,3]}"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(id.count == 36)
        let piped = try await cli.ok(["log", "append", "phrases"], stdin: "{\"phrase\": \"I want juice\"}\n")
        #expect(piped.trimmingCharacters(in: .whitespacesAndNewlines).count == 36)
        #expect(try await cli.ok(["log", "append", "sessions", "{\"minutes\":25}", "--id", "s-1"]) == "s-1\n")
        #expect(try await cli.ok(["log", "append", "sessions", "{\"minutes\":25}", "--id", "s-1"]) == "s-1\n")
        #expect(try await cli.status()["entries"] as? Int == 3)
        let lines = try await cli.ok(["log", "list", "--json"]).split(separator: "\n")
        #expect(lines.count == 3)
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            for key in ["id", "stream", "device_id", "time", "payload"] {
                #expect(object[key] != nil, "\(key) missing")
            }
        }
        #expect(try await cli.ok(["log", "list", "sessions"]).contains("{\"minutes\":25}"))
        #expect(try await cli.ok(["log", "list", "--since", "2999-01-01"]).isEmpty)
    }

    /// `printf '{"a":"\xff\xfe\xc0"}' | lansync log append s` stored U+FFFD for each byte and exited 0.
    @Test func textThatIsNotUTF8IsRefusedNotRewritten() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init", "--name", "a"])
        let invalid: [UInt8] = Array(#"{"a":""#.utf8) + [0xFF, 0xFE, 0xC0] + Array(#""}"#.utf8)
        let piped = try await cli.run(["log", "append", "s"], stdinBytes: invalid)
        #expect(piped.status == 1 && piped.stderr.contains("not valid UTF-8 (byte 6 is not)"), "\(piped.stderr)")
        let lines = try await cli.run(
            ["log", "append", "s", "--lines"],
            stdinBytes: Array("{\"ok\":1}\n".utf8) + invalid
        )
        #expect(
            lines.status == 1 && lines.stderr.contains("line 2") && lines.stderr.contains("UTF-8"),
            "\(lines.stderr)"
        )
        let schema = try await cli.run(
            ["schema", "apply", "-"],
            stdinBytes: Array("CREATE TABLE t (id TEXT PRIMARY KEY, v TEXT DEFAULT '".utf8) + [0xFF] + Array("');".utf8)
        )
        #expect(schema.status == 1 && schema.stderr.contains("UTF-8"), "\(schema.stderr)")
        #expect(try await cli.status()["entries"] as? Int == 0)
        // Valid UTF-8, beyond ASCII, goes in as given.
        try await cli.ok(["log", "append", "s"], stdin: #"{"a":"é✓🙂"}"#)
        #expect(try await cli.ok(["log", "list", "s"]).contains(#"{"a":"é✓🙂"}"#))
    }

    @Test func badInputExitsNonZeroAndWritesNothing() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init"])
        let cases: [[String]] = [
            ["log", "append", "taps", "{not json"],
            ["log", "append", "Bad Stream", "{}"],
            ["log", "append", "", "{}"],
            ["log", "append", "taps", "{}", "--id", "has space"],
            ["pref", "set", "Bad//Key", "1"],
            ["pref", "set", "a/b", "unquoted text"],
            ["log", "list", "--since", "last tuesday"],
            ["export", "--format", "xml"],
        ]
        for arguments in cases {
            let result = try await cli.run(arguments)
            #expect(result.status != 0, "\(arguments) succeeded")
            #expect(!result.stderr.isEmpty, "\(arguments) said nothing")
        }
        let status = try await cli.status()
        #expect(status["entries"] as? Int == 0)
        #expect(status["preferences"] as? Int == 0)
    }

    @Test func bulkLinesAreAllOrNothing() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init"])
        let bad = try await cli.run(
            ["log", "append", "symbol_taps", "--lines"],
            stdin: "{\"a\":1}\n{\"a\":2}\n{\"a\":\n{\"a\":4}\n"
        )
        #expect(bad.status != 0)
        #expect(bad.stderr.contains("line 3"))
        #expect(try await cli.status()["entries"] as? Int == 0)
        let input = (0..<25_000).map { "{\"symbol_id\":\($0)}" }.joined(separator: "\n") + "\n\n"
        let ids = try await cli.ok(["log", "append", "symbol_taps", "--lines"], stdin: input).split(separator: "\n")
        #expect(ids.count == 25_000)
        #expect(Set(ids).count == 25_000)
        #expect(try await cli.status()["entries"] as? Int == 25_000)
    }

    @Test func preferencesSetGetListUnset() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init"])
        try await cli.ok(["pref", "set", "controls/slider/sensitivity", "0.7"])
        try await cli.ok(["pref", "set", "caregiver/active", "\"dad\""])
        #expect(try await cli.ok(["pref", "get", "caregiver/active"]) == "\"dad\"\n")
        let json = try await cli.ok(["pref", "get", "caregiver/active", "--json"])
        #expect(json.contains("\"key\":\"caregiver/active\"") && json.contains("\"value\":\"dad\""))
        #expect(try await cli.ok(["pref", "list"]).contains("controls/slider/sensitivity"))
        try await cli.ok(["pref", "unset", "caregiver/active"])
        let missing = try await cli.run(["pref", "get", "caregiver/active"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("not set"))
        #expect(!(try await cli.ok(["pref", "list"]).contains("caregiver/active")))
        #expect(try await cli.ok(["pref", "list", "--all", "--json"]).contains("\"unset\":true"))
        let status = try await cli.status()
        #expect(status["preferences"] as? Int == 1)
        #expect(status["unset_preferences"] as? Int == 1)
    }
}

@Suite(.serialized) struct ExportImportCLITests {
    @Test func exportImportExportGivesTheSameDigest() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init", "--name", "home"])
        try await cli.ok(["log", "append", "symbol_taps", "{\"symbol_id\":1,\"label\":\"more\"}"])
        try await cli.ok(["log", "append", "symbol_taps", "{\"symbol_id\":2,\"label\":\"stop, now\"}"])
        try await cli.ok(["log", "append", "sessions", "{\"minutes\":25}"])
        try await cli.ok(["pref", "set", "caregiver/active", "\"dad\""])
        try await cli.ok(["pref", "set", "board/rows", "4"])
        try await cli.ok(["pref", "unset", "board/rows"])
        let exportPath = cli.root + "/backup.jsonl"
        try await cli.ok(["export", "--out", exportPath])
        #expect(!FileManager.default.fileExists(atPath: exportPath + ".partial"))
        // Another machine: a different machine ID, so a different device.
        try "fedcba9876543210fedcba9876543210".write(toFile: cli.root + "/other-id", atomically: true, encoding: .utf8)
        let other = try await cli.run(
            ["init"],
            node: "b",
            environment: ["LANSYNC_MACHINE_ID_FILE": cli.root + "/other-id"]
        )
        #expect(other.status == 0)
        #expect(try await cli.ok(["import", exportPath], node: "b").contains("imported 3 new entries"))
        let a = try await cli.status("a")
        let b = try await cli.status("b")
        #expect(a["digest"] as? String == b["digest"] as? String)
        #expect(b["entries"] as? Int == 3)
        let again = cli.root + "/again.jsonl"
        try await cli.ok(["export", "--out", again], node: "b")
        let first = try String(contentsOfFile: exportPath, encoding: .utf8).split(separator: "\n").dropFirst()
        let second = try String(contentsOfFile: again, encoding: .utf8).split(separator: "\n").dropFirst()
        #expect(Array(first) == Array(second))
    }

    @Test func truncatedImportWritesNothing() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init"])
        for index in 0..<5 { try await cli.ok(["log", "append", "taps", "{\"i\":\(index)}"]) }
        let full = try await cli.ok(["export"])
        let truncated = cli.root + "/truncated.jsonl"
        try String(full.prefix(full.count * 2 / 3)).write(toFile: truncated, atomically: true, encoding: .utf8)
        try "fedcba9876543210fedcba9876543210".write(toFile: cli.root + "/other-id", atomically: true, encoding: .utf8)
        _ = try await cli.run(["init"], node: "b", environment: ["LANSYNC_MACHINE_ID_FILE": cli.root + "/other-id"])
        let result = try await cli.run(["import", truncated], node: "b")
        #expect(result.status != 0)
        #expect(result.stderr.contains("nothing was imported") || result.stderr.contains("Nothing was imported"))
        #expect(try await cli.status("b")["entries"] as? Int == 0)
        let missing = try await cli.run(["import", cli.root + "/nope.jsonl"], node: "b")
        #expect(missing.status != 0 && missing.stderr.contains("no file"))
    }

    @Test func csvOfOneStreamHasAColumnPerField() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init"])
        try await cli.ok([
            "log", "append", "symbol_taps", "{\"symbol_id\":1,\"label\":\"more\",\"grid_position\":[2,3]}",
        ])
        try await cli.ok(["log", "append", "phrases", "{\"text\":\"hi\"}"])
        let csv = try await cli.ok(["export", "--format", "csv", "--stream", "symbol_taps"])
        let rows = csv.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(rows.count == 2)
        #expect(rows[0] == "id,time,device_id,grid_position,label,symbol_id")
        let refused = try await cli.run(["export", "--stream", "symbol_taps"])
        #expect(refused.status != 0 && refused.stderr.contains("--format csv"))
    }
}

@Suite struct HelpCLITests {
    @Test(arguments: [
        ["init"], ["id"], ["log", "append"], ["log", "list"], ["pref", "set"], ["pref", "get"], ["pref", "list"],
        ["pref", "unset"], ["status"], ["export"], ["import"], ["group", "create"], ["group", "join"],
        ["group", "show"],
        ["group", "leave"], ["run"], ["peers"], ["sync"], ["watch"], ["why"], ["doctor"], ["report"],
        ["report", "usage"],
        ["report", "sessions"], ["report", "regression"],
    ])
    func everyCommandHelpHasAnExample(command: [String]) async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let result = try await cli.run(command + ["--help"], node: nil)
        #expect(result.status == 0)
        #expect(result.stdout.contains("lansync " + command.joined(separator: " ")), "\(command)")
        #expect(result.stdout.contains("Example"), "\(command) --help has no example")
    }
}

@Suite(.serialized) struct GroupCLITests {
    @Test func createJoinShowLeave() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init"])
        let none = try await cli.run(["group", "show"])
        #expect(none.status == 1 && none.stderr.contains("group create"))
        let created = try await cli.ok(["group", "create"])
        let code = try await cli.ok(["group", "show", "--code"]).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(created.contains(code))
        let tag =
            try JSONSerialization.jsonObject(with: Data(try await cli.ok(["group", "show", "--json"]).utf8))
            as! [String: Any]
        #expect(created.contains(tag["tag"] as! String))
        #expect(try await cli.status()["group_tag"] as? String == tag["tag"] as? String)
        let permissions =
            try FileManager.default.attributesOfItem(atPath: cli.dataDir("a") + "/group.json")[.posixPermissions]
            as? Int
        #expect(permissions == 0o600)
        #expect(try await cli.run(["group", "create"]).status != 0)

        try "fedcba9876543210fedcba9876543210".write(toFile: cli.root + "/other-id", atomically: true, encoding: .utf8)
        _ = try await cli.run(["init"], node: "b", environment: ["LANSYNC_MACHINE_ID_FILE": cli.root + "/other-id"])
        #expect(
            try await cli.ok(["group", "join", code.uppercased()], node: "b").contains(
                "joined group \(tag["tag"] as! String)"
            )
        )
        #expect(try await cli.ok(["group", "join", code], node: "b").contains("nothing changed"))
        var typo = Array(code)
        typo[3] = typo[3] == "a" ? "b" : "a"
        let refused = try await cli.run(["group", "join", String(typo)], node: "b")
        #expect(refused.status != 0 && refused.stderr.contains("mistyped"))
        // Moving to another group needs --replace.
        try await cli.ok(["group", "leave", "--erase"])
        try await cli.ok(["group", "create"])
        let other = try await cli.ok(["group", "show", "--code"]).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await cli.run(["group", "join", other], node: "b").stderr.contains("--replace"))
        #expect(try await cli.ok(["group", "join", other, "--replace"], node: "b").contains("joined group"))
    }
}

@Suite struct ConfigCLITests {
    @Test func theConfigFileSetsTheDataDirectoryAndFlagsWin() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let config = cli.root + "/lansync.conf"
        try "# test\ndata-dir = \(cli.dataDir("fromconfig"))\n".write(toFile: config, atomically: true, encoding: .utf8)
        try await cli.ok(["--config", config, "init", "--name", "configured"], node: nil)
        #expect(FileManager.default.fileExists(atPath: cli.dataDir("fromconfig") + "/identity.json"))
        // --data-dir wins over the file.
        try await cli.ok(["init", "--name", "flagged", "--config", config], node: "flag")
        #expect(FileManager.default.fileExists(atPath: cli.dataDir("flag") + "/identity.json"))
        let status = try await cli.ok(["status", "--json", "--config=\(config)"], node: nil)
        #expect(status.contains("\"name\":\"configured\""))
    }

    @Test func aBadConfigStopsEveryCommandWithTheLineAndWritesNothing() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let config = cli.root + "/bad.conf"
        try "data-dir = \(cli.dataDir("x"))\nmax-clock-skew = soon\n".write(
            toFile: config,
            atomically: true,
            encoding: .utf8
        )
        let result = try await cli.run(["--config", config, "init"], node: nil)
        #expect(result.status == 1)
        #expect(result.stderr.contains("bad.conf:2: max-clock-skew: 'soon'"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: cli.dataDir("x")), "nothing ran")
        let missing = try await cli.run(["--config", cli.root + "/absent.conf", "status"], node: nil)
        #expect(missing.status == 1 && missing.stderr.contains("does not exist"))
        // A directory is no file; /dev/null is an empty one, the usual way to say "none".
        let directory = try await cli.run(["--config", cli.root, "status"], node: nil)
        #expect(directory.status == 1 && directory.stderr.contains("cannot read the config file"))
        #expect(try await cli.ok(["--config", "/dev/null", "help", "config"], node: nil).hasPrefix("CONFIG"))
    }

    @Test func helpTopicsExplainTheConcepts() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        for topic in ["groups", "streams", "preferences", "reinstall", "discovery", "config"] {
            let text = try await cli.ok(["help", topic], node: nil)
            #expect(text.hasPrefix(topic.uppercased()), "\(topic): \(text.prefix(40))")
            #expect(text.contains("lansync "), "\(topic) shows a command")
        }
        #expect(try await cli.ok(["help", "group"], node: nil).hasPrefix("GROUPS"), "singular works too")
        #expect(
            try await cli.ok(["--version"], node: nil).trimmingCharacters(in: .whitespacesAndNewlines).first?.isNumber
                == true
        )
    }
}

@Suite struct DoctorCLITests {
    @Test func doctorNamesEachProblemWithItsFix() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init", "--name", "checked"], node: "a")
        let alone = try await cli.run(["doctor"], node: "a")
        #expect(alone.status == 1)
        #expect(alone.stdout.contains("FAIL  in no group"), "\(alone.stdout)")
        #expect(alone.stdout.contains("fix: `lansync group create`"))
        #expect(alone.stdout.contains("no agent running"))
        #expect(alone.stdout.contains("ok    replica file intact"), "\(alone.stdout)")
        try await cli.ok(["group", "create"], node: "a")
        chmod(cli.dataDir("a"), 0o755)
        let open = try await cli.run(["doctor"], node: "a")
        #expect(open.stdout.contains("is readable by others (mode 755)"), "\(open.stdout)")
        #expect(open.stdout.contains("fix: chmod 700 \(cli.dataDir("a"))"))
        #expect(!open.stdout.contains("in no group"))
        let missing = try await cli.run(["doctor"], node: "nothing-here")
        #expect(missing.status == 1 && missing.stdout.contains("lansync init"))
    }
}

@Suite struct ProgressCLITests {
    /// Long exports and imports show progress on stderr: plain lines with counts, percentage and
    /// rate when not on a terminal (the test hook reports every update instead of every 2 s).
    @Test func exportAndImportReportProgress() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init"], node: "a")
        let lines = (0..<3_000).map { "{\"n\":\($0)}" }.joined(separator: "\n")
        try await cli.ok(["log", "append", "taps", "--lines"], node: "a", stdin: lines)
        let file = cli.root + "/export.jsonl"
        let fast = ["LANSYNC_PROGRESS_INTERVAL_MS": "0"]
        let exported = try await cli.run(["export", "--out", file], node: "a", environment: fast)
        #expect(exported.status == 0)
        #expect(exported.stderr.contains("export: 1,000 of 3,000 entries (33%)"), "\(exported.stderr)")
        #expect(exported.stderr.contains("/s"))
        try await cli.ok(["init"], node: "b")
        let imported = try await cli.run(["import", file], node: "b", environment: fast)
        #expect(imported.status == 0)
        #expect(imported.stderr.contains("import: 2,000 entries ("), "\(imported.stderr)")
        // Without the hook, a line at most every 2 s: quick work stays quiet. (A busy machine may
        // make this export slow enough for one, so the bound follows the time it took.)
        let started = Date()
        let quiet = try await cli.run(["export", "--out", file], node: "a")
        let seconds = Date().timeIntervalSince(started)
        let shown = quiet.stderr.split(separator: "\n").filter { $0.hasPrefix("export:") }.count
        #expect(shown <= Int(seconds / 2), "\(shown) lines in \(seconds) s: \(quiet.stderr)")
    }
}

@Suite struct ServiceFilesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The unit runs the agent with restart on failure, its own state directory and hardening; where
    /// systemd-analyze exists it must find nothing wrong with it (the binary path aside).
    @Test func theSystemdUnitRunsTheAgentConfined() async throws {
        let unit = try String(contentsOfFile: Self.root + "/packaging/lansync.service", encoding: .utf8)
        let lines = Set(unit.split(separator: "\n").map(String.init))
        for required in [
            "ExecStart=/usr/local/bin/lansync --config /etc/lansync/lansync.conf run", "Restart=on-failure",
            "StateDirectory=lansync", "StateDirectoryMode=0700", "User=lansync", "ProtectSystem=strict",
            "ProtectHome=yes",
            "PrivateTmp=yes", "NoNewPrivileges=yes", "WantedBy=multi-user.target",
        ] {
            #expect(lines.contains(required), "missing \(required)")
        }
        let analyze = "/usr/bin/systemd-analyze"
        guard FileManager.default.isExecutableFile(atPath: analyze) else { return }
        let copy = NSTemporaryDirectory() + "lansync-\(UUID().uuidString).service"
        try unit.replacingOccurrences(of: "/usr/local/bin/lansync", with: CLI.executable)
            .write(toFile: copy, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: analyze)
        process.arguments = ["verify", "--man=no", copy]
        let (status, output, _) = try await process.runCapturingOutput(mergingErrors: true)
        #expect(status == 0 && !output.contains("lansync"), "systemd-analyze: \(output)")
    }

    @Test func theExampleConfigIsValid() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let result = try await cli.run(
            ["--config", Self.root + "/packaging/lansync.conf", "help", "config"],
            node: nil
        )
        #expect(result.status == 0, "\(result.stderr)")
    }
}

@Suite struct ConcurrentOpenCLITests {
    /// A process killed mid-write leaves a WAL that the next opener must recover; other processes
    /// opening the replica meanwhile get SQLITE_BUSY_RECOVERY at once (no busy handler). They must
    /// wait and succeed, not fail with "locked" (seen when a CLI command raced an agent's start).
    @Test func processesOpeningAReplicaThatNeedsRecoveryAllSucceed() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init"], node: "a")
        for round in 0..<3 {
            let writer = Process()
            writer.executableURL = URL(fileURLWithPath: CLI.executable)
            writer.arguments = ["log", "append", "taps", "--lines", "--data-dir", cli.dataDir("a")]
            let input = cli.root + "/lines-\(round)"
            try (0..<60_000).map { "{\"n\":\($0)}" }.joined(separator: "\n").write(
                toFile: input,
                atomically: true,
                encoding: .utf8
            )
            writer.standardInput = FileHandle(forReadingAtPath: input)
            writer.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            writer.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try writer.run()
            // Kill it once it has committed some batches (the WAL has frames), before it closes.
            // Polled on this thread, not awaited: an await can be delayed by other tests until
            // the writer has finished, and then nothing needs recovery.
            #expect(
                eventuallyOnThisThread(within: 20) {
                    ((try? FileManager.default.attributesOfItem(atPath: cli.dataDir("a") + "/replica.sqlite-wal")[.size]
                        as? Int)
                        ?? 0) > 2_000_000
                }
            )
            kill(writer.processIdentifier, SIGKILL)
            writer.waitUntilExit()
            // Several processes open it at once; one recovers the WAL, the others must wait for it.
            let openers = (0..<4).map { _ in
                let process = Process()
                process.executableURL = URL(fileURLWithPath: CLI.executable)
                process.arguments = ["status", "--json", "--data-dir", cli.dataDir("a")]
                process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
                process.standardError = FileHandle(forWritingAtPath: "/dev/null")
                return process
            }
            for process in openers { try process.run() }
            for process in openers { process.waitUntilExit() }
            #expect(openers.allSatisfy { $0.terminationStatus == 0 }, "round \(round): every opener succeeds")
        }
    }
}

/// A full disk: a command that commits in batches says exactly what was committed and what was
/// not (it used to print 20,000 ids, then claim "nothing was written"); an import, one
/// transaction, says nothing was imported, and nothing was.
@Suite(.serialized, .enabled(if: getuid() == 0, "mounting a small file system needs root"))
struct FullDiskTests {
    @Test func batchedAppendsAndImportSayExactlyWhatWasCommitted() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let mountPoint = cli.dataDir("small-disk")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mount = try await CLI.shell("mount -t tmpfs -o size=6m tmpfs '\(mountPoint)'")
        #expect(mount == 0)
        defer { _ = try? CLI.shell("umount '\(mountPoint)'") }
        // An export made elsewhere, to import once the disk is full.
        try await cli.device("elsewhere")
        let notes = (0..<20_000).map { "{\"note\":\"\($0) \(String(repeating: "y", count: 80))\"}" }
        _ = try await cli.ok(
            ["log", "append", "notes", "--lines"],
            node: "elsewhere",
            stdin: notes.joined(separator: "\n")
        )
        let export = cli.root + "/elsewhere.jsonl"
        try await cli.ok(["export", "--out", export], node: "elsewhere")

        try await cli.ok(["init", "--name", "full"], node: "small-disk/node")
        let lines = (0..<60_000).map {
            "{\"symbol\":\"more\",\"i\":\($0),\"note\":\"\(String(repeating: "x", count: 60))\"}"
        }
        let result = try await cli.run(
            ["log", "append", "taps", "--lines"],
            node: "small-disk/node",
            stdin: lines.joined(separator: "\n")
        )
        #expect(result.status != 0)
        let printed = result.stdout.split(separator: "\n").count
        #expect(printed > 0 && printed < 60_000 && printed % 10_000 == 0, "\(printed) ids printed")
        #expect(result.stderr.contains("the disk is full"))
        #expect(
            result.stderr.contains("the first \(printed) entries (input lines 1–\(printed)) were appended"),
            "\(result.stderr)"
        )
        #expect(
            result.stderr.contains(
                "the remaining \(60_000 - printed) entries (input lines \(printed + 1)–60000) were not"
            )
        )
        #expect(!result.stderr.contains("nothing was written"))
        // Exactly the printed entries are held.
        #expect(try await cli.status("small-disk/node")["entries"] as? Int == printed)

        // The failed batch's rollback gave its space back: fill the disk to the last byte again.
        _ = try await CLI.shell("dd if=/dev/zero of='\(mountPoint)/filler' bs=64k 2>/dev/null")
        let imported = try await cli.run(["import", export], node: "small-disk/node")
        #expect(imported.status != 0)
        #expect(imported.stderr.contains("nothing of \(export) was imported"), "\(imported.stderr)")
        // The replica's disk is full; the export file was read fine and is not to blame.
        #expect(
            imported.stderr.contains("the disk is full") && !imported.stderr.contains("cannot read"),
            "\(imported.stderr)"
        )
        #expect(try await cli.status("small-disk/node")["entries"] as? Int == printed)
    }
}

/// `lansync report`: the usage document's regression test through the command line, with entries
/// written eight days ago (a node clock set back) and today.
@Suite struct ReportCLITests {
    @Test func regressionFlagsASymbolThatFellOutOfUseAndThirtyDaysExportAndReimport() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init", "--name", "tablet"])
        let eightDaysAgo = ["LANSYNC_TEST_CLOCK_OFFSET_MS": "\(-8 * 86_400_000)"]
        let helps = (1...15).map { _ in #"{"symbol_id":"help","session_id":"old"}"# }.joined(separator: "\n")
        let written = try await cli.run(
            ["log", "append", "symbol_taps", "--lines"],
            stdin: helps,
            environment: eightDaysAgo
        )
        #expect(written.status == 0, "\(written.stderr)")
        for _ in 0..<3 {
            try await cli.ok(["log", "append", "symbol_taps", #"{"symbol_id":"want","session_id":"today"}"#])
        }

        let flags = try await cli.ok(["report", "regression", "symbol_taps", "--key", "symbol_id", "--json"])
            .split(separator: "\n").map(String.init)
        #expect(flags.count == 1, "\(flags)")
        let help = try JSONSerialization.jsonObject(with: Data((flags.first ?? "{}").utf8)) as? [String: Any] ?? [:]
        #expect(help["key"] as? String == "help")
        #expect(help["previous_frequency"] as? Int == 15)
        #expect((help["last_used"] as? String)?.hasSuffix("Z") == true)

        let usage = try await cli.ok(["report", "usage", "symbol_taps", "--by", "symbol_id", "--json"])
        #expect(usage.contains(#""group":"help","count":15"#))
        #expect(usage.contains(#""group":"want","count":3"#))
        // By device, a device shows by its name (its ID stays in the JSON's group).
        let byDevice = try await cli.ok(["report", "usage", "symbol_taps"])
        #expect(byDevice.contains("DEVICE") && byDevice.contains("tablet"), "\(byDevice)")
        let byDeviceJSON = try await cli.ok(["report", "usage", "symbol_taps", "--json"])
        #expect(byDeviceJSON.contains(#""name":"tablet""#), "\(byDeviceJSON)")
        let sessions = try await cli.ok(["report", "sessions", "symbol_taps", "--session-field", "session_id"])
        #expect(sessions.contains("old") && sessions.contains("today"))

        // TEST: data_export_complete — GIVEN 30 days of usage data exists WHEN caregiver exports as
        // JSON THEN export contains all log entries with all fields AND timestamps are ISO 8601
        // format AND file can be re-imported without data loss.
        for day in 1...30 {
            let written = try await cli.run(
                [
                    "log", "append", "symbol_taps",
                    #"{"symbol_id":"more","session_id":"day-\#(day)","grid_position":[2,3]}"#,
                ],
                environment: ["LANSYNC_TEST_CLOCK_OFFSET_MS": "\(-day * 86_400_000)"]
            )
            #expect(written.status == 0, "\(written.stderr)")
        }
        let file = cli.root + "/usage.jsonl"
        try await cli.ok(["export", "--out", file])
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["type"] as? String == "entry" }
        #expect(lines.count == 15 + 3 + 30)
        let iso8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
        for line in lines {
            #expect(
                Set(line.keys).isSuperset(of: [
                    "id", "stream", "device_id", "replica_id", "counter", "hlc", "time", "wall_ms", "payload",
                ])
            )
            #expect((line["time"] as? String)?.wholeMatch(of: iso8601) != nil, "\(line)")
        }
        try await cli.ok(["init", "--name", "therapist"], node: "b")
        try await cli.ok(["import", file], node: "b")
        #expect(try await cli.digest("b") == cli.digest("a"))

        let bad = try await cli.run(["report", "usage", "Bad Stream"])
        #expect(bad.status != 0)
        #expect(bad.stderr.contains("stream name"))
    }
}

/// A data directory that cannot be written (here a read-only bind mount): every command said
/// "database error: unable to open database file". Reading commands now work; writing ones say
/// that the directory is read-only, and write nothing.
@Suite(.serialized, .enabled(if: getuid() == 0, "a read-only bind mount needs root"))
struct ReadOnlyDataDirectoryTests {
    @Test func readingCommandsWorkAndWritesSayTheDirectoryIsReadOnly() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init", "--name", "archive"], node: "rw")
        try await cli.ok(["group", "create"], node: "rw")
        try await cli.ok(
            ["schema", "apply", "-"],
            node: "rw",
            stdin: "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT);"
        )
        try await cli.ok(["exec", "INSERT INTO notes (id, body) VALUES ('n1', 'kept')"], node: "rw")
        for index in 0..<3 { try await cli.ok(["log", "append", "taps", "{\"n\":\(index)}"], node: "rw") }
        let digest = try await cli.digest("rw")
        let mountPoint = cli.dataDir("ro")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        #expect(
            try await CLI.shell(
                "mount --bind '\(cli.dataDir("rw"))' '\(mountPoint)' && mount -o remount,ro,bind '\(mountPoint)'"
            ) == 0
        )
        defer { _ = try? CLI.shell("umount '\(mountPoint)'") }

        #expect(try await cli.digest("ro") == digest)
        #expect(try await cli.ok(["log", "list", "taps"], node: "ro").split(separator: "\n").count == 3)
        #expect(try await cli.ok(["query", "SELECT body FROM notes", "--csv"], node: "ro") == "body\r\nkept\r\n")
        #expect(try await cli.ok(["export"], node: "ro").contains("\"type\":\"end\""))
        for write in [
            ["log", "append", "taps", "{}"], ["pref", "set", "ui/theme", "\"dark\""], ["exec", "DELETE FROM notes"],
        ] {
            let refused = try await cli.run(write, node: "ro")
            #expect(refused.status == 1 && refused.stderr.contains("read-only"), "\(write): \(refused.stderr)")
            #expect(!refused.stderr.contains("unable to open database file"), "\(refused.stderr)")
        }
        let run = try await cli.run(["run", "--no-mdns", "--listen", "127.0.0.1:0", "--no-api"], node: "ro")
        #expect(
            run.status == 1 && run.stderr.contains("is read-only, and the agent writes what it syncs"),
            "\(run.stderr)"
        )
        #expect(try await cli.digest("rw") == digest)
    }
}

import Foundation
import LANSyncLocalAPI
import LANSyncTestSupport
import Testing

/// The local API of a running agent, over real HTTP from Python's standard library (another
/// language, as the apps it serves): its rules and errors, and the change feed followed across
/// an agent restart.
@Suite(.serialized) struct LocalAPICLITests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let tapsScript = root.appendingPathComponent("Examples/python/taps.py").path
    static let checksScript = root.appendingPathComponent("Tests/LANSyncCLITests/python/api_checks.py").path
    static let limitsScript = root.appendingPathComponent("Tests/LANSyncCLITests/python/api_limits.py").path

    /// Runs python3 with `arguments` to the end, waiting without holding a thread; returns its
    /// status and output.
    static func python(
        _ arguments: [String],
        dataDir: String
    ) async throws -> (status: Int32, output: String, errors: String) {
        let (status, output, errors) = try await pythonProcess(arguments, dataDir: dataDir).runCapturingOutput()
        return (status, output, errors)
    }

    /// python3 with `arguments`, for the agent of `dataDir`.
    static func pythonProcess(_ arguments: [String], dataDir: String) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        var environment = CLI.environment()
        environment["LANSYNC_DATA_DIR"] = dataDir
        process.environment = environment
        return process
    }

    /// Starts python3 with `arguments`, its output in pipes, for a test that goes on meanwhile.
    static func start(_ arguments: [String], dataDir: String) throws -> (process: Process, output: Pipe, errors: Pipe) {
        let process = pythonProcess(arguments, dataDir: dataDir)
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        return (process, output, errors)
    }

    /// Half-sent requests held connections forever, and 3,000 change feeds were all accepted
    /// (file descriptors 258 → 3,034): the API bounds what its clients may hold, and says so.
    @Test func theAPIClosesHalfSentRequestsAndBoundsFeedsAndConnections() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.ok(["init", "--name", "a"], node: "a")
        try await cli.ok(["group", "create"], node: "a")
        let agent = try await AgentProcess(cli, node: "a")
        defer { agent.stop() }
        #expect(await eventually { FileManager.default.fileExists(atPath: cli.dataDir("a") + "/api-address") })
        let limits =
            "{\"connections\": \(APILimits.connections), \"feeds\": \(APILimits.feeds), \"idle_seconds\": \(APILimits.idleSeconds)}"
        let (status, text, errors) = try await Self.python(
            [Self.limitsScript, cli.dataDir("a"), limits],
            dataDir: cli.dataDir("a")
        )
        #expect(status == 0, "\(errors)")
        let results = try #require(
            try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: [String: Any]],
            "\(text)"
        )
        #expect(results.count == 4)
        for (name, result) in results.sorted(by: { $0.key < $1.key }) {
            #expect(result["ok"] as? Bool == true, "\(name): \(result["detail"] ?? "")")
        }
        #expect(agent.process.isRunning)
    }

    @Test func theAPIAnswersAsDocumentedAndRefusesWhatItMust() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.device("a")
        try await cli.ok(["group", "create"], node: "a")
        try await cli.ok(
            ["schema", "apply", "-"],
            node: "a",
            stdin: "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT);"
        )
        let agent = try await AgentProcess(cli, node: "a")
        defer { agent.stop() }
        #expect(await eventually { FileManager.default.fileExists(atPath: cli.dataDir("a") + "/api-address") })
        let run = try await Self.python([Self.checksScript, cli.dataDir("a")], dataDir: cli.dataDir("a"))
        #expect(run.status == 0, "\(run.errors)")
        let results = try #require(
            try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: [String: Any]],
            "\(run.output) \(run.errors)"
        )
        #expect(results.count >= 30)
        for (name, result) in results.sorted(by: { $0.key < $1.key }) {
            #expect(result["ok"] as? Bool == true, "\(name): \(result["detail"] ?? "")")
        }
        // The writes through the API are the node's: the CLI sees them.
        #expect(
            try await cli.ok(["query", "SELECT body FROM notes ORDER BY id", "--csv"], node: "a")
                == "body\r\nfirst\r\nsecond\r\n"
        )
        // Stopping the agent removes the API's address and socket; the token stays.
        agent.stop()
        for file in ["api-address", "api.sock"] {
            #expect(!FileManager.default.fileExists(atPath: cli.dataDir("a") + "/" + file))
        }
        #expect(FileManager.default.fileExists(atPath: cli.dataDir("a") + "/api-token"))
    }

    @Test func theChangeFeedLosesAndRepeatsNothingAcrossAnAgentRestart() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.device("a")
        try await cli.ok(["group", "create"], node: "a")
        let dataDir = cli.dataDir("a")
        var agent = try await AgentProcess(cli, node: "a")
        defer { agent.stop() }
        #expect(await eventually { FileManager.default.fileExists(atPath: dataDir + "/api-address") })
        // The follower keeps its cursor in a file, as an app would, and stops after 100 taps. It
        // waits out the agent's restart for up to 600 s: on a busy machine the 20 appends made
        // meanwhile, a process each, once took more than 120 s.
        let follower = try Self.start(
            [
                Self.tapsScript, "follow", "--stream", "taps", "--cursor-file", cli.root + "/cursor", "--count", "100",
                "--give-up-after", "600",
            ],
            dataDir: dataDir
        )
        // SIGKILL: Python never sees the SIGTERM that the test runner's children inherit blocked.
        defer { if follower.process.isRunning { kill(follower.process.processIdentifier, SIGKILL) } }
        let first = try await Self.python(
            [Self.tapsScript, "append", "--count", "40", "--stream", "taps"],
            dataDir: dataDir
        )
        #expect(first.status == 0, "\(first.errors)")
        // The agent goes away; taps are logged meanwhile (offline, straight into the replica); it comes back.
        #expect(agent.stop() == 0)
        for index in 0..<20 { try await cli.ok(["log", "append", "taps", "{\"offline\":\(index)}"], node: "a") }
        agent = try await AgentProcess(cli, node: "a")
        let second = try await Self.python(
            [Self.tapsScript, "append", "--count", "40", "--stream", "taps"],
            dataDir: dataDir
        )
        #expect(second.status == 0, "\(second.errors)")
        // Also a tap of another stream, which this follower skips.
        try await cli.ok(["log", "append", "other", "{}"], node: "a")
        let deadline = Date().addingTimeInterval(300)
        while follower.process.isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        #expect(!follower.process.isRunning, "the follower did not see 100 taps in 300 s")
        if follower.process.isRunning { kill(follower.process.processIdentifier, SIGKILL) }
        let received = String(decoding: follower.output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(separator: "\n").map(String.init)
        let held = try await cli.ok(["log", "list", "taps", "--json"], node: "a").split(separator: "\n").map { line in
            (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? String ?? ""
        }
        #expect(held.count == 100)
        #expect(received.count == 100, "received \(received.count)")
        #expect(Set(received).count == received.count, "a tap was received twice")
        #expect(Set(received) == Set(held), "missing: \(Set(held).subtracting(received).count)")
    }
}

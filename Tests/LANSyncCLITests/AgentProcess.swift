import Foundation
import LANSyncTestSupport
import Testing

/// A `lansync run` process on loopback, stopped (SIGTERM, then SIGKILL) when released.
final class AgentProcess {
    let process = Process()
    let port: Int
    let node: String
    private let output: String
    /// The agent's output files, closed when it stops (see `Process.runCapturingOutput`).
    private var handles: [FileHandle] = []

    /// Starts an agent for `node` listening on a free loopback port, with extra arguments, and
    /// waits until it prints its port. Discovery is off unless asked for: on a machine whose own
    /// avahi-daemon runs, agents would otherwise find each other by mDNS and bypass, say, the
    /// tampering proxy a test puts between them (discovery has its own tests, in namespaces).
    init(
        _ cli: CLI,
        node: String,
        arguments: [String] = [],
        environment: [String: String] = [:],
        listen: String = "127.0.0.1:0",
        discovery: Bool = false
    ) async throws {
        self.node = node
        output = cli.root + "/agent-\(node)-\(UUID().uuidString).out"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        _ = FileManager.default.createFile(atPath: output + ".log", contents: nil)
        process.executableURL = URL(fileURLWithPath: CLI.executable)
        // The local API on a free port unless a test chooses: agents of one test machine must not
        // contend for the default port.
        let api = arguments.contains { $0 == "--api" || $0 == "--no-api" } ? [] : ["--api", "127.0.0.1:0"]
        process.arguments =
            ["run", "--data-dir", cli.dataDir(node), "--listen", listen, "--log-level", "debug"]
            + (discovery ? [] : ["--no-mdns"]) + api + arguments
        var env = CLI.environment()
        for (key, value) in environment { env[key] = value }
        process.environment = env
        handles = [
            try FileHandle(forWritingTo: URL(fileURLWithPath: output)),
            try FileHandle(forWritingTo: URL(fileURLWithPath: output + ".log")),
        ]
        process.standardOutput = handles[0]
        process.standardError = handles[1]
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var found: Int?
        // A generous deadline: on a busy machine (CI beside other work) an agent may take seconds to start.
        for _ in 0..<1_200 {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }),
                let port = Int(line.split(separator: ":").last ?? "")
            {
                found = port
                break
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard let found else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            throw AgentError.didNotStart((try? String(contentsOfFile: output + ".log", encoding: .utf8)) ?? "")
        }
        port = found
    }

    enum AgentError: Error { case didNotStart(String) }

    var address: String { "127.0.0.1:\(port)" }
    var log: String { (try? String(contentsOfFile: output + ".log", encoding: .utf8)) ?? "" }

    /// Stops gracefully; returns the exit status.
    @discardableResult
    func stop() -> Int32 {
        defer {
            for handle in handles { try? handle.close() }
            handles = []
        }
        guard process.isRunning else { return process.terminationStatus }
        process.terminate()
        for _ in 0..<100 where process.isRunning { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit { stop() }
}

extension CLI {
    /// Initialises `node` with its own machine ID (a separate device) and, when given, joins `code`'s group.
    func device(_ node: String, joining code: String? = nil) async throws {
        let machineID = root + "/machine-id-\(node)"
        try (UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())
            .write(toFile: machineID, atomically: true, encoding: .utf8)
        let result = try await run(
            ["init", "--name", node],
            node: node,
            environment: ["LANSYNC_MACHINE_ID_FILE": machineID]
        )
        #expect(result.status == 0, "init \(node): \(result.stderr)")
        if let code { try await ok(["group", "join", code], node: node) }
    }

    /// Starts a group on `node` and returns its join code.
    func newGroup(on node: String) async throws -> String {
        try await ok(["group", "create"], node: node)
        return try await ok(["group", "show", "--code"], node: node).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Devices `first` and the others, all in one new group started on `first`; returns its join code.
    @discardableResult
    func group(of first: String, _ others: String...) async throws -> String {
        try await device(first)
        let code = try await newGroup(on: first)
        for other in others { try await device(other, joining: code) }
        return code
    }

    /// A therapy room's machine in two families' groups: "room" in home-a's group (its first,
    /// `default`) and in home-b's (named `family-b` on the room).
    func roomInTwoFamilies() async throws {
        try await device("room")
        let codeA = try await newGroup(on: "room")
        try await device("home-a", joining: codeA)
        try await device("home-b")
        let codeB = try await newGroup(on: "home-b")
        try await ok(["group", "join", codeB, "--name", "family-b"], node: "room")
    }

    func digest(_ node: String) async throws -> String { try await status(node)["digest"] as! String }
    func entries(_ node: String) async throws -> Int { try await status(node)["entries"] as! Int }
}

/// Polls until `condition` holds or `seconds` pass, blocking this thread between polls; returns
/// whether it held. Only for a step that must follow its condition at once (see its caller):
/// everything else awaits `eventually`, which lets other tests run meanwhile.
func eventuallyOnThisThread(within seconds: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.05)
    }
    return try condition()
}

/// A loopback TCP port free a moment ago, for an agent a test starts later on a known address
/// (a peer dialing it before it runs).
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

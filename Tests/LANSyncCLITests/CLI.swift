import Foundation
import LANSyncTestSupport
import Testing

/// Runs the built `lansync` executable as a user would, capturing its output and exit code.
struct CLI {
    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    let root = NSTemporaryDirectory() + "lansync-cli-\(UUID().uuidString)"
    let machineIDFile: String

    init() throws {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        machineIDFile = root + "/machine-id"
        try "0123456789abcdef0123456789abcdef\n".write(toFile: machineIDFile, atomically: true, encoding: .utf8)
    }

    func remove() { try? FileManager.default.removeItem(atPath: root) }

    /// The `lansync` binary beside this test bundle in the build directory.
    static let executable: String = {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("lansync").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(
            ".build/debug/lansync"
        ).path
    }()

    func dataDir(_ name: String) -> String { root + "/" + name }

    /// Runs `lansync ARGS` with the data directory `node` and, optionally, standard input; waits
    /// without holding a thread (`Process.runUntilExit`).
    @discardableResult
    func run(
        _ arguments: [String],
        node: String? = "a",
        stdin: String? = nil,
        stdinBytes: [UInt8]? = nil,
        environment: [String: String] = [:]
    ) async throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = arguments + (node.map { ["--data-dir", dataDir($0)] } ?? [])
        var env = Self.environment()
        env["LANSYNC_MACHINE_ID_FILE"] = machineIDFile
        env.removeValue(forKey: "LANSYNC_DATA_DIR")
        for (key, value) in environment { env[key] = value }
        process.environment = env
        var input: FileHandle?
        if let stdin = stdinBytes ?? stdin.map({ Array($0.utf8) }) {
            let inPath = root + "/in-\(UUID().uuidString)"
            try Data(stdin).write(to: URL(fileURLWithPath: inPath))
            input = FileHandle(forReadingAtPath: inPath)
        }
        let (status, stdout, stderr) = try await process.runCapturingOutput(input: input)
        return Result(status: status, stdout: stdout, stderr: stderr)
    }

    /// Runs a command that must succeed, and returns its standard output.
    @discardableResult
    func ok(
        _ arguments: [String],
        node: String? = "a",
        stdin: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    )
        async throws -> String
    {
        let result = try await run(arguments, node: node, stdin: stdin)
        #expect(
            result.status == 0,
            "lansync \(arguments.joined(separator: " ")) failed: \(result.stderr)",
            sourceLocation: sourceLocation
        )
        return result.stdout
    }

    /// `status --json` of a node, parsed.
    func status(_ node: String = "a") async throws -> [String: Any] {
        let text = try await ok(["status", "--json"], node: node)
        return try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
    }
}

extension CLI {
    /// The environment a test runs `lansync` in: this process's, with the configuration file
    /// pinned to an empty one. Without a config file `lansync` reads /etc/lansync/lansync.conf
    /// when present, and the Debian package test installs and purges that file while other tests
    /// run (one of them once read it mid-purge and failed).
    static func environment(_ extra: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["LANSYNC_CONFIG"] = emptyConfig
        for (key, value) in extra { environment[key] = value }
        return environment
    }

    /// An empty configuration file: the machine's own never applies to a test.
    static let emptyConfig = "/dev/null"

    /// Runs a shell command (`interpreter -c command`) and waits without holding a thread
    /// (`Process.runUntilExit`); returns its exit status.
    static func shell(_ command: String, interpreter: String = "/bin/sh") async throws -> Int32 {
        try await shellProcess(command, interpreter: interpreter).runUntilExit()
    }

    /// Runs a shell command and blocks its thread until it exits: only where no await is
    /// possible (a `defer`, a static property); returns its exit status.
    static func shell(_ command: String) throws -> Int32 {
        let process = shellProcess(command)
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// `interpreter -c command`, reading nothing.
    private static func shellProcess(_ command: String, interpreter: String = "/bin/sh") -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: interpreter)
        process.arguments = ["-c", command]
        process.environment = environment()
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        return process
    }
}

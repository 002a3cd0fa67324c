import Foundation

/// What an idle agent costs: two `lansync run` processes on loopback, connected to each other
/// and in sync, left alone; each one's CPU time and context switches (all its threads) are read
/// from /proc over the measuring window. Separate processes, so nothing of the benchmark itself
/// is counted. Goal: below 0.1% of a core and a few wakeups a second. Context switches of all
/// threads stand for wakeups (each wakeup is at least one); the bar printed is 10 a second, the
/// cost of the keepalive's one message per 2 s each way passing through NIO and Swift's pool.
struct IdleBenchmark {
    let root: String
    /// The `lansync` executable beside this benchmark's own.
    static var executable: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("lansync").path
    }

    func run(seconds: Int) throws {
        print("")
        print("Idle agent (two `lansync run` processes on loopback, one peer each, nothing written):")
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            print("  skipped: no lansync executable at \(Self.executable) (build the lansync product too)")
            return
        }
        let a = root + "/idle-a"
        let b = root + "/idle-b"
        try lansync(["init", "--name", "idle-a"], a)
        try lansync(["init", "--name", "idle-b"], b)
        try lansync(["group", "create"], a)
        let code = try lansync(["group", "show", "--code"], a).trimmingCharacters(in: .whitespacesAndNewlines)
        try lansync(["group", "join", code], b)
        try lansync(["log", "append", "taps", "{\"idle\":true}"], a)
        let portA = 20_000 + Int(getpid() % 20_000)
        let agentA = try start(["run", "--no-mdns", "--listen", "127.0.0.1:\(portA)", "--log-level", "error"], a)
        let agentB = try start(
            [
                "run", "--no-mdns", "--listen", "127.0.0.1:\(portA + 1)", "--peer", "127.0.0.1:\(portA)", "--log-level",
                "error",
            ],
            b
        )
        defer {
            for agent in [agentA, agentB] {
                agent.terminate()
                agent.waitUntilExit()
            }
        }
        try lansync(["sync", "--wait", "--peers", "1", "--timeout", "20"], b)
        Thread.sleep(forTimeInterval: 2)  // past start-up work (first checkpoint, peers.json)
        let before = [Usage(pid: agentA.processIdentifier), Usage(pid: agentB.processIdentifier)]
        let start = Date()
        Thread.sleep(forTimeInterval: Double(seconds))
        let elapsed = Date().timeIntervalSince(start)
        let after = [Usage(pid: agentA.processIdentifier), Usage(pid: agentB.processIdentifier)]
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        for (index, name) in ["a (listening)", "b (dialing)"].enumerated() {
            let cpu = Double(after[index].cpuTicks - before[index].cpuTicks) / ticks / elapsed * 100
            let switches = Double(after[index].contextSwitches(since: before[index])) / elapsed
            GoalRecord.record(
                "idle agent \(name): CPU",
                figure: String(format: "%.3f%% of a core", cpu),
                goal: "< 0.1% of a core",
                met: cpu < 0.1
            )
            GoalRecord.record(
                "idle agent \(name): wakeups",
                figure: String(format: "%.1f context switches/s", switches),
                goal: "≤ 10/s",
                met: switches <= 10
            )
            print(
                String(
                    format: "  agent %@ over %.0f s: %.3f%% of a core (goal < 0.1%%: %@), %.1f context switches/s "
                        + "(goal: a few, <= 10: %@)",
                    name,
                    elapsed,
                    cpu,
                    cpu < 0.1 ? "met" : "MISSED",
                    switches,
                    switches <= 10 ? "met" : "MISSED"
                )
            )
        }
        fflush(nil)
    }

    /// CPU ticks and context switches of every thread of a process, from /proc.
    struct Usage {
        /// The process's CPU time, its exited threads' included.
        var cpuTicks = 0
        /// Each live thread's context switches so far, by thread ID.
        var switchesByThread: [String: Int] = [:]

        /// Context switches since `earlier` of the threads alive now (a thread that exited
        /// meanwhile takes its count with it: pools let idle threads go).
        func contextSwitches(since earlier: Usage) -> Int {
            switchesByThread.reduce(0) { $0 + $1.value - (earlier.switchesByThread[$1.key] ?? 0) }
        }

        init(pid: Int32) {
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            {
                // Fields after the command name: state is field 3; utime and stime are 14 and 15.
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                cpuTicks = (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
            }
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            for task in tasks {
                guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)
                else {
                    continue
                }
                for line in status.split(separator: "\n") where line.contains("ctxt_switches") {
                    switchesByThread[task, default: 0] +=
                        Int(line.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
                }
            }
        }
    }

    @discardableResult
    func lansync(_ arguments: [String], _ dataDir: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = arguments + ["--data-dir", dataDir]
        process.environment = ["LANSYNC_MACHINE_ID_FILE": "/nonexistent", "PATH": "/usr/bin:/bin"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchmarkFailure(
                "lansync \(arguments.joined(separator: " ")) failed with status \(process.terminationStatus)"
            )
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Starts `lansync` with `arguments` on `dataDir`; its standard output goes to `output`, if given.
    func start(_ arguments: [String], _ dataDir: String, output: String? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = arguments + ["--data-dir", dataDir]
        process.environment = ["LANSYNC_MACHINE_ID_FILE": "/nonexistent", "PATH": "/usr/bin:/bin"]
        if let output {
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        } else {
            process.standardOutput = FileHandle.nullDevice
        }
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

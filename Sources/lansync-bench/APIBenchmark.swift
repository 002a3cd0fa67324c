import Foundation
import LANSync
import LANSyncAgent
import LANSyncLocalAPI
import LANSyncStore
import Logging
import ServiceLifecycle

/// `--api`: the local API's speed goals (issue 15) beside the library's own figures, measured in
/// the same run and alternating (API, library, API, library …): an append from another process
/// (Python's standard library over one keep-alive connection to loopback, as an app in another
/// language would) p99 ≤ 2 ms, and ≥ 20,000 appends/s with batching. Each round is a fresh
/// agent; figures are medians of the rounds, with ranges.
struct APIBenchmark {
    let root: String
    let appends: Int
    let batched: Int
    let rounds = 3

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Examples/python/taps.py").path

    func run() async throws {
        print(
            "Local API: appends from a Python process (standard library, one keep-alive connection) to an agent on loopback,"
        )
        print("beside the library's own appends in the agent's process; \(rounds) rounds alternating, medians [ranges]")
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            print("    skipped: no /usr/bin/python3")
            return
        }
        var apiP50 = [Double]()
        var apiP99 = [Double]()
        var libraryP50 = [Double]()
        var libraryP99 = [Double]()
        var apiRate = [Double]()
        var libraryRate = [Double]()
        for round in 0..<rounds {
            let directory = DataDirectory(path: root + "/api-\(round)")
            _ = try LANSyncNode.initialize(at: directory, name: "api-bench", machineIDPath: "/nonexistent")
            let node = try LANSyncNode.open(at: directory)
            _ = try node.createGroup()
            var configuration = AgentConfiguration()
            configuration.listenHost = "127.0.0.1"
            configuration.listenPort = 0
            configuration.discovery = false
            var logger = Logger(label: "bench")
            logger.logLevel = .error
            let agent = try Agent(node: node, configuration: configuration, logger: logger)
            var apiConfiguration = LocalAPIConfiguration()
            apiConfiguration.port = 0
            let api = await LocalAPI(agent: agent, configuration: apiConfiguration, logger: logger)
            let group = ServiceGroup(services: [agent, api], logger: logger)
            let running = Task { try await group.run() }
            _ = try await api.port()

            // A: single appends through the API from another process.
            let single = try Self.python(["append", "--count", "\(appends)", "--data-dir", directory.path])
            apiP50.append(single["p50_ms"] as? Double ?? .nan)
            apiP99.append(single["p99_ms"] as? Double ?? .nan)
            // B: the same appends through the library, in the agent's process.
            var latencies = Latencies()
            for index in 0..<appends {
                let start = ContinuousClock.now
                _ = try await node.append(
                    to: "symbol_taps",
                    payload: "{\"symbol_id\":\(index % 8),\"label\":\"more\",\"session_id\":\"library\"}"
                )
                latencies.add(ContinuousClock.now - start)
            }
            libraryP50.append(latencies.percentile(0.5))
            libraryP99.append(latencies.percentile(0.99))
            // A: batches of 500 through the API.
            let batch = try Self.python([
                "batch", "--count", "\(batched)", "--per-request", "500", "--data-dir", directory.path,
            ])
            apiRate.append(batch["per_second"] as? Double ?? .nan)
            // B: the same batches through the library.
            let start = ContinuousClock.now
            for first in stride(from: 0, to: batched, by: 500) {
                let requests = (first..<min(first + 500, batched)).map {
                    AppendRequest(
                        id: nil,
                        stream: "symbol_taps",
                        payload: "{\"symbol_id\":\($0 % 8),\"label\":\"more\",\"session_id\":\"library\"}"
                    )
                }
                _ = try await node.append(requests)
            }
            libraryRate.append(Double(batched) / (ContinuousClock.now - start).seconds)

            await group.triggerGracefulShutdown()
            try await running.value
        }
        let describe = Benchmark.medianAndRange
        let p99 = apiP99.sorted()[apiP99.count / 2]
        GoalRecord.record(
            "local API: one append per request",
            figure: "p99 \(describe(apiP99, "%.3f")) ms",
            goal: "p99 ≤ 2 ms",
            met: p99 <= 2
        )
        print("one append per request, \(appends) each, idle agent")
        print(
            "    API       p50 \(describe(apiP50, "%.3f")) ms   p99 \(describe(apiP99, "%.3f")) ms   (goal p99 <= 2 ms: \(p99 <= 2 ? "met" : "MISSED"))"
        )
        print("    library   p50 \(describe(libraryP50, "%.3f")) ms   p99 \(describe(libraryP99, "%.3f")) ms")
        let rate = apiRate.sorted()[apiRate.count / 2]
        GoalRecord.record(
            "local API: batches of 500 entries",
            figure: "\(describe(apiRate, "%.0f")) appends/s",
            goal: "≥ 20,000 appends/s",
            met: rate >= 20_000
        )
        print("batches of 500 entries, \(batched) entries")
        print(
            "    API       \(describe(apiRate, "%.0f")) appends/s   (goal >= 20000: \(rate >= 20_000 ? "met" : "MISSED"))"
        )
        print("    library   \(describe(libraryRate, "%.0f")) appends/s")
        print(
            String(
                format: "    ratio of medians %.2f x the library",
                rate / libraryRate.sorted()[libraryRate.count / 2]
            )
        )
        fflush(nil)
    }

    /// Runs Examples/python/taps.py and returns the JSON object it prints.
    static func python(_ arguments: [String]) throws -> [String: Any] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        else {
            throw APIBenchmarkError(
                message: "taps.py \(arguments.joined(separator: " ")) failed: \(String(decoding: data, as: UTF8.self))"
            )
        }
        return object
    }
}

struct APIBenchmarkError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

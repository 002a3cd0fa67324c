import Foundation
import LANSync
import LANSyncStore
import Synchronization

/// `lansync-bench`: LANSync's speed goals, each printed beside a baseline measured in the same run.
///
///     swift run -c release lansync-bench                    # 100,000 rows, then network
///     swift run -c release lansync-bench --quick            # 10,000 rows, a shorter look
///     swift run -c release lansync-bench --smoke            # every stage at its least (the test command)
///     swift run -c release lansync-bench --catch-up 100000  # one network catch-up, for profiling
///                                            [--append-every MS]  # the app's write interval (10)
///     swift run -c release lansync-bench --stages           # each catch-up step's cost per row
///     swift run -c release lansync-bench --signatures [N]   # what verifying signed changes costs
///     swift run -c release lansync-bench --idle 60          # an idle agent's CPU and wakeups
///     swift run -c release lansync-bench --streams          # streams and preferences alone (single node)
///     swift run -c release lansync-bench --tables [--quick] # app tables only
///     swift run -c release lansync-bench --storage [--quick] # app tables on disk beside plain SQLite
///     swift run -c release lansync-bench --api [--quick]    # the local API only
@main
struct Benchmark {
    static let usage = """
        usage: lansync-bench [OPTION]       (build with -c release: debug figures mean nothing)

          (none)               every speed goal: 100,000 rows, app tables, signatures, local API, network
          --quick              the same with 10,000 rows: a shorter look, figures less steady
          --smoke              every stage at its least (1,000 rows): that it runs, not how fast; the
                       test command runs it. --smoke goes wherever [--quick] is shown below
          --tables [--quick]   app tables only, and what each kind of column costs beside a plain one
          --storage [--quick]  what an app table takes on disk beside a plain SQLite file of the same rows
          --group-trial [--smoke] what a responder serving several groups pays to find an initiator's group
          --groups N [--quick] a node in N groups (50), two peers each, beside a node in one: idle CPU,
                       memory per group, a write reaching its peer, the handshake's key trial
          --streams [--quick]  streams and preferences alone: appends, merge, append latency idle and during a merge
          --tables-profile [merge [session]] [chain] [baseline]  LANSync's app-table bulk insert (and merge
                       on one thread and as a session, or as a session only; chain signing) alone, for a
                       profiler; with baseline, each beside the baseline
          --api [--quick]      the local API only
          --signatures [N]     what verifying signed changes costs, over N entries (1,000,000)
          --stages             each catch-up step's cost per row
          --catch-up N [--append-every MS] [--runs K]  one network catch-up of N entries (K alternated
               with the baseline inserting the same N rows; medians and ranges), or for a profiler
          --idle S             an idle agent's CPU and wakeups over S seconds
          --json FILE          also write every goal measured as JSON lines (scripts/performance-table reads them)
        """
    static let options: Set<String> = [
        "--quick", "--smoke", "--streams", "--tables", "--storage", "--group-trial", "--groups", "--tables-profile",
        "merge",
        "session",
        "chain", "baseline", "--api", "--signatures", "--stages", "--catch-up", "--append-every", "--runs", "--idle",
        "--json",
    ]

    static func main() async throws {
        var arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.contains("--help") || arguments.contains("-h") { return print(usage) }
        if let json = arguments.firstIndex(of: "--json") {
            guard json + 1 < arguments.count else {
                FileHandle.standardError.write(Data("lansync-bench: --json needs a file to write\n\n\(usage)\n".utf8))
                exit(2)
            }
            arguments.remove(at: json + 1)
        }
        if let unknown = arguments.first(where: { !options.contains($0) && Int($0) == nil }) {
            FileHandle.standardError.write(Data("lansync-bench: unknown option \(unknown)\n\n\(usage)\n".utf8))
            exit(2)
        }
        try await run()
        try GoalRecord.writeIfAsked()
    }

    /// The run the options ask for.
    static func run() async throws {
        // The baseline opens SQLite before any replica does: the same process settings for both.
        SQLiteProcessSettings.apply()
        let scale = Scale(arguments: CommandLine.arguments)
        let root = NSTemporaryDirectory() + "lansync-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        if CommandLine.arguments.contains("--stages") { return try await StageBenchmark.run(root: root) }
        if CommandLine.arguments.contains("--signatures") {
            return try await SignatureBenchmark.run(root: root, entries: integer(after: "--signatures") ?? 1_000_000)
        }
        if CommandLine.arguments.contains("--tables-profile") {
            var tables = AppTableBenchmark(root: root, rows: 100_000)
            return try await tables.profileInsert()
        }
        if CommandLine.arguments.contains("--group-trial") { return try GroupTrialBenchmark.run(scale: scale) }
        if CommandLine.arguments.contains("--groups") {
            return try groups(count: integer(after: "--groups") ?? 50, scale: scale, root: root)
        }
        if CommandLine.arguments.contains("--storage") {
            return try await StorageBenchmark(root: root, rows: scale.pick(100_000, quick: 10_000, smoke: 1_000)).run()
        }
        if CommandLine.arguments.contains("--tables") {
            var tables = AppTableBenchmark(root: root, rows: scale.pick(100_000, quick: 10_000, smoke: 1_000))
            try await tables.run()
            var kinds = ColumnKindsBenchmark(root: root, rows: scale.pick(20_000, quick: 2_000, smoke: 200))
            try await kinds.run()
            return try await StorageBenchmark(root: root, rows: scale.pick(100_000, quick: 10_000, smoke: 1_000)).run()
        }
        let api = APIBenchmark(
            root: root,
            appends: scale.pick(2_000, quick: 200, smoke: 20),
            batched: scale.pick(40_000, quick: 5_000, smoke: 1_000)
        )
        if CommandLine.arguments.contains("--api") { return try await api.run() }
        // `--idle S`: only the idle agents' cost, over S seconds.
        if let seconds = integer(after: "--idle") { return try IdleBenchmark(root: root).run(seconds: seconds) }
        // `--catch-up N [--append-every MS] [--runs K]`: only the network catch-up of N entries,
        // each beside the baseline's inserts of the same N rows.
        if let size = integer(after: "--catch-up") {
            return try await catchUpBesideBaseline(
                size: size,
                runs: max(1, integer(after: "--runs") ?? 1),
                appendEvery: .milliseconds(integer(after: "--append-every") ?? 10),
                root: root
            )
        }
        let baseline = try await singleNode(scale: scale, root: root)
        if CommandLine.arguments.contains("--streams") { return }
        var tables = AppTableBenchmark(root: root, rows: scale.pick(100_000, quick: 10_000, smoke: 1_000))
        try await tables.run()
        var kinds = ColumnKindsBenchmark(root: root, rows: scale.pick(20_000, quick: 2_000, smoke: 200))
        try await kinds.run()
        try await StorageBenchmark(root: root, rows: scale.pick(100_000, quick: 10_000, smoke: 1_000)).run()
        print("")
        try await SignatureBenchmark.run(root: root, entries: scale.pick(1_000_000, quick: 20_000, smoke: 2_000))
        print("")
        try await api.run()
        // Nothing of the single-node stages outlives them: their nodes closed and their deltas were
        // released when `singleNode` returned, and their files go now. Kept open and in memory
        // (removed files stay on disk while open), they made the 1M catch-up 6.2 s instead of 4.9.
        for name in try FileManager.default.contentsOfDirectory(atPath: root) {
            try FileManager.default.removeItem(atPath: root + "/" + name)
        }
        var network = NetworkBenchmark(root: root, baseline: baseline)
        try await network.run(scale: scale)
        try IdleBenchmark(root: root).run(seconds: scale.pick(60, quick: 3, smoke: 1))
        try groups(count: scale.pick(50, quick: 4, smoke: 2), scale: scale, root: root)
    }

    /// `runs` rounds of the baseline inserting `size` rows, then a network catch-up of `size`
    /// entries (A B A B): a catch-up's time says little on its own on a machine whose speed varies
    /// by the hour, its ratio to plain SQLite writing the same rows in the same minute says more.
    static func catchUpBesideBaseline(size: Int, runs: Int, appendEvery: Duration, root: String) async throws {
        var baselineSeconds = [Double]()
        var catchUpSeconds = [Double]()
        for run in 1...runs {
            let path = root + "/baseline-catch-up-\(run).sqlite"
            let time = try Baseline.insert(
                Workload.peerDelta(count: size, startMilliseconds: Timestamps.nowMilliseconds() - 3_600_000).entries,
                batch: 1_000,
                path: path,
                binding: .raw
            )
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            baselineSeconds.append(time.seconds)
            let rate = Double(size) / time.seconds
            row(
                String(format: "baseline: plain SQLite, the same \(size) rows, 1,000 rows/txn, %.2f s", time.seconds),
                rate: rate,
                goal: nil
            )
            var network = NetworkBenchmark(root: root, baseline: rate)
            catchUpSeconds.append(try await network.catchUp(size: size, appendEvery: appendEvery))
            print("")
        }
        guard runs > 1 else { return }
        let summary = medianAndRange
        // The ratio of rates within each run: the baseline's seconds over the catch-up's.
        let ratios = zip(baselineSeconds, catchUpSeconds).map { $0 / $1 }
        print("\(runs) runs, medians [ranges]:")
        print("    catch-up of \(size) entries: \(summary(catchUpSeconds, "%.2f")) s")
        print("    baseline inserting the same rows: \(summary(baselineSeconds, "%.2f")) s")
        print("    catch-up against the baseline of its run: \(summary(ratios, "%.2f")) × baseline (goal ≥ 0.5)")
    }

    /// A node in `count` groups beside a node in one (`GroupsBenchmark`), then the key trial.
    static func groups(count: Int, scale: Scale, root: String) throws {
        try GroupsBenchmark(
            root: root,
            groups: count,
            idleSeconds: scale.pick(120, quick: 3, smoke: 1),
            settleSeconds: scale.pick(100, quick: 3, smoke: 1),
            writes: scale.pick(40, quick: 6, smoke: 2)
        ).run()
        try GroupTrialBenchmark.run(scale: scale)
    }

    /// The baseline and the single-node stages; returns the baseline's rows/s.
    static func singleNode(scale: Scale, root: String) async throws -> Double {
        let rows = scale.pick(100_000, quick: 10_000, smoke: 1_000)
        var counter = 0
        func freshNode() throws -> LANSyncNode {
            counter += 1
            let directory = DataDirectory(path: root + "/node-\(counter)")
            _ = try LANSyncNode.initialize(at: directory, name: "bench-\(counter)", machineIDPath: "/nonexistent")
            return try LANSyncNode.open(at: directory)
        }
        let now = Timestamps.nowMilliseconds()
        let clock = ContinuousClock()
        let delta = Workload.peerDelta(count: rows, startMilliseconds: now - 3_600_000)
        let payloadBytes = delta.entries.map(\.payload.utf8.count).reduce(0, +) / rows

        print(
            "LANSync benchmark: \(rows) rows, payloads of \(payloadBytes) bytes, WAL + synchronous=FULL, "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores"
        )
        print("")

        // Baseline: plain SQLite, 1,000 rows per transaction, bound through the C API; median of three runs.
        let baselineTime = try Baseline.medianInsert(delta.entries, batch: 1_000, directory: root, binding: .raw)
        let baseline = Double(rows) / baselineTime.seconds
        row("baseline: plain SQLite, prepared INSERT (C API), 1,000 rows/txn, median of 3", rate: baseline, goal: nil)
        let grdbTime = try Baseline.medianInsert(delta.entries, batch: 1_000, directory: root, binding: .throughGRDB)
        row(
            "  the same, bound through GRDB's execute(arguments:), for reference",
            rate: Double(rows) / grdbTime.seconds,
            baseline: baseline,
            goal: nil
        )

        // Appends through the library's batch API, 1,000 per durable commit.
        let batchNode = try freshNode()
        let requests = (0..<rows).map { AppendRequest(stream: "symbol_taps", payload: Workload.payload($0)) }
        var start = clock.now
        for first in stride(from: 0, to: rows, by: 1_000) {
            _ = try await batchNode.append(Array(requests[first..<min(first + 1_000, rows)]))
        }
        let batchRate = Double(rows) / (clock.now - start).seconds
        row("append, library batch API, 1,000 entries/commit", rate: batchRate, baseline: baseline, goal: 0.5)

        // Appends from 64 concurrent callers, one entry each call: group commit at work.
        let concurrentNode = try freshNode()
        let callers = 64
        start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for caller in 0..<callers {
                group.addTask {
                    for index in stride(from: caller, to: rows, by: callers) {
                        _ = try await concurrentNode.append(to: "symbol_taps", payload: Workload.payload(index))
                    }
                }
            }
            try await group.waitForAll()
        }
        let concurrentRate = Double(rows) / (clock.now - start).seconds
        row(
            "append, \(callers) concurrent callers, one entry/call",
            rate: concurrentRate,
            baseline: baseline,
            goal: nil
        )

        // Merge of a peer's delta into an empty replica.
        let mergeNode = try freshNode()
        start = clock.now
        try await mergeNode.merge(delta, maxSkewMilliseconds: 60_000)
        let mergeRate = Double(rows) / (clock.now - start).seconds
        row("merge, delta apply in paced transactions", rate: mergeRate, baseline: baseline, goal: 0.5)
        print("")

        // Latency of one append, one caller, idle node.
        let latencyNode = try freshNode()
        var idle = Latencies()
        for index in 0..<scale.pick(2_000, quick: 500, smoke: 50) {
            let begin = clock.now
            _ = try await latencyNode.append(to: "symbol_taps", payload: Workload.payload(index))
            idle.add(clock.now - begin)
        }
        latency("append latency, idle", idle, goal: 1)

        // Latency of one append while a large delta is being merged into the same replica.
        let mergeSize = scale.pick(200_000, quick: 20_000, smoke: 2_000)
        let bigDelta = Workload.peerDelta(count: mergeSize, startMilliseconds: now - 7_200_000)
        let finished = Atomic<Bool>(false)
        let mergeStart = clock.now
        let merging = Task {
            defer { finished.store(true, ordering: .releasing) }
            return try await latencyNode.merge(bigDelta, maxSkewMilliseconds: 60_000)
        }
        var during = Latencies()
        var index = 0
        while !finished.load(ordering: .acquiring) {
            let begin = clock.now
            _ = try await latencyNode.append(to: "symbol_taps", payload: Workload.payload(index))
            during.add(clock.now - begin)
            index += 1
            try await Task.sleep(for: .milliseconds(1))
        }
        _ = try await merging.value
        let mergeSeconds = (clock.now - mergeStart).seconds
        latency(
            "append latency during a \(mergeSize)-entry merge (\(during.samples.count) appends, merge "
                + String(format: "%.2f s", mergeSeconds) + ")",
            during,
            goal: 5
        )
        let status = try latencyNode.status()
        print("")
        print(
            "check: \(status.entries) entries held after the merge test (expected \(mergeSize + idle.samples.count + during.samples.count))"
        )
        return baseline
    }

    /// The integer given after `flag` on the command line, if any.
    static func integer(after flag: String) -> Int? {
        let arguments = CommandLine.arguments
        guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
        return Int(arguments[index + 1])
    }

    /// Prints a rate, and its ratio to the baseline against the goal; `name` names the goal in the
    /// `--json` records when the label carries figures of its own.
    static func row(_ label: String, rate: Double, baseline: Double? = nil, goal: Double?, name: String? = nil) {
        var line = label.padding(toLength: 80, withPad: " ", startingAt: 0) + String(format: "%10.0f rows/s", rate)
        if let baseline {
            let ratio = rate / baseline
            line += String(format: "   %.2f x baseline", ratio)
            if let goal {
                line +=
                    ratio >= goal
                    ? String(format: " (goal >= %.1f: met)", goal) : String(format: " (goal >= %.1f: MISSED)", goal)
                GoalRecord.record(
                    name ?? label,
                    figure: String(format: "%.2f × baseline (%.0f rows/s)", ratio, rate),
                    goal: String(format: "≥ %.1f × baseline", goal),
                    met: ratio >= goal
                )
            }
        }
        print(line)
        fflush(nil)
    }

    /// `values`' median and range, each printed with `format` (`"%.2f"`): "1.25 [1.10-1.40]".
    static func medianAndRange(_ values: [Double], _ format: String) -> String {
        let sorted = values.sorted()
        return String(
            format: "\(format) [\(format)-\(format)]",
            sorted[sorted.count / 2],
            sorted[0],
            sorted[sorted.count - 1]
        )
    }

    static func latency(_ label: String, _ samples: Latencies, goal: Double) {
        let p99 = samples.percentile(0.99)
        GoalRecord.record(
            label,
            figure: String(format: "p99 %.3f ms (p50 %.3f)", p99, samples.percentile(0.5)),
            goal: String(format: "p99 ≤ %.0f ms", goal),
            met: p99 <= goal
        )
        print(label)
        print(
            String(
                format: "    p50 %.3f ms   p99 %.3f ms   max %.3f ms   (goal p99 <= %.0f ms: %@)",
                samples.percentile(0.5),
                p99,
                samples.percentile(1),
                goal,
                p99 <= goal ? "met" : "MISSED"
            )
        )
        fflush(nil)
    }
}

import Foundation
import GRDB
import LANSync
import LANSyncCore
import LANSyncWire
import Synchronization
import Testing

/// A node in a fresh temporary data directory, removed when the test ends.
final class TemporaryNode {
    let root = NSTemporaryDirectory() + "lansync-node-\(UUID().uuidString)"
    let node: LANSyncNode

    /// `machineID`: the machine's ID (a reinstall on the same machine keeps it); random by default.
    init(name: String = "test-node", clock: NodeClock = NodeClock(), machineID id: String? = nil) throws {
        let machineID = root + "-machine-id"
        try (id ?? UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())
            .write(toFile: machineID, atomically: true, encoding: .utf8)
        _ = try LANSyncNode.initialize(at: DataDirectory(path: root), name: name, machineIDPath: machineID)
        node = try LANSyncNode.open(at: DataDirectory(path: root), clock: clock)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
        try? FileManager.default.removeItem(atPath: root + "-machine-id")
    }
}

@Suite struct NodeWriteTests {
    /// The learning game's keys (`game.<id>.level.L20`, and Swift's uppercase UUIDs) were
    /// refused. Keys are case-insensitive: folded to lowercase where an app hands them in, so
    /// only lowercase is stored and sent, and the app's own spelling finds its value.
    @Test func preferenceKeysAreCaseInsensitive() async throws {
        let temporary = try TemporaryNode()
        let node = temporary.node
        let write = try await node.set("game.6F9619FF-8B86-D011-B42D-00C04FC964FF.level.L20", to: "{\"stars\":3}")
        #expect(write.key == "game.6f9619ff-8b86-d011-b42d-00c04fc964ff.level.l20")
        #expect(try node.preference("game.6F9619FF-8B86-D011-B42D-00C04FC964FF.level.L20") == "{\"stars\":3}")
        #expect(try node.preference("GAME.6f9619ff-8b86-d011-b42d-00c04fc964ff.LEVEL.l20") == "{\"stars\":3}")
        #expect(try node.preferences().map(\.key) == ["game.6f9619ff-8b86-d011-b42d-00c04fc964ff.level.l20"])
        try await node.unset("Game.6f9619ff-8b86-d011-b42d-00c04fc964ff.Level.L20")
        #expect(try node.preference("game.6f9619ff-8b86-d011-b42d-00c04fc964ff.level.l20") == nil)
        // Folding is all it does: the reserved prefix and other characters are still refused.
        await #expect(throws: LANSyncError.self) { try await node.set("LANSync/member/x", to: "1") }
        await #expect(throws: LANSyncError.self) { try await node.set("game/Lé", to: "1") }
    }

    @Test func concurrentAppendsAreAllDurableWithDistinctDots() async throws {
        let temporary = try TemporaryNode()
        let node = temporary.node
        let entries = try await withThrowingTaskGroup(of: Entry.self) { group in
            for index in 0..<200 {
                group.addTask { try await node.append(to: "symbol_taps", payload: "{\"tap\":\(index)}") }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(entries.map(\.dot)).count == 200)
        #expect(Set(entries.map(\.id)).count == 200)
        // Reopen: every acknowledged append is there.
        let reopened = try LANSyncNode.open(at: node.dataDirectory)
        #expect(try reopened.status().entries == 200)
        #expect(try reopened.store.recomputeDigest() == reopened.status().digest)
    }

    @Test func badInputIsRefusedAndNothingIsWritten() async throws {
        let node = try TemporaryNode().node
        await #expect(throws: LANSyncError.self) { try await node.append(to: "taps", payload: "{not json") }
        await #expect(throws: LANSyncError.self) { try await node.append(to: "Bad Stream", payload: "{}") }
        await #expect(throws: LANSyncError.self) { try await node.append(to: "taps", payload: "   ") }
        await #expect(throws: LANSyncError.self) {
            try await node.append([
                AppendRequest(stream: "taps", payload: "1"), AppendRequest(stream: "taps", payload: "["),
            ])
        }
        await #expect(throws: LANSyncError.self) { try await node.set("Bad Key", to: "1") }
        await #expect(throws: LANSyncError.self) { try await node.set("a/b", to: "nope") }
        let status = try node.status()
        #expect(status.entries == 0)
        #expect(status.preferences == 0)
    }

    @Test func payloadsAreCompactedButOtherwiseKeptExactly() async throws {
        let node = try TemporaryNode().node
        let entry = try await node.append(to: "phrases", payload: "{ \"text\" : \"I want  juice\",\n \"n\": 1.50 }")
        #expect(entry.payload == "{\"text\":\"I want  juice\",\"n\":1.50}")
    }

    @Test func changesStreamLocalWrites() async throws {
        let node = try TemporaryNode().node
        var changes = node.changes().makeAsyncIterator()
        let entry = try await node.append(to: "sessions", payload: "{}")
        let write = try await node.set("caregiver/active", to: "\"dad\"")
        #expect(await changes.next() == .entries([entry], local: true))
        #expect(await changes.next() == .preferences([write], local: true))
    }
}

@Suite struct NodeMergeTests {
    func delta(from node: LANSyncNode) throws -> Delta {
        try node.store.delta(since: VersionVector(), maxRows: 100_000)
    }

    @Test func twoNodesConvergeAndObserversSeeMergedEntries() async throws {
        let (a, b) = (try TemporaryNode(), try TemporaryNode())
        try await a.node.append(to: "taps", payload: "1")
        try await b.node.append(to: "taps", payload: "2")
        try await a.node.set("controls/slider/sensitivity", to: "0.5")
        // Clocks read milliseconds: two writes within one would tie, and the greater replica ID
        // would win instead of the later write.
        try await Task.sleep(for: .milliseconds(5))
        try await b.node.set("controls/slider/sensitivity", to: "0.9")
        var changes = b.node.changes().makeAsyncIterator()
        let outcome = try await b.node.merge(try delta(from: a.node), maxSkewMilliseconds: 60_000)
        #expect(outcome.entriesAdded == 1)
        if case .entries(let entries, let local) = await changes.next() {
            #expect(entries.map(\.payload) == ["1"])
            #expect(!local)
        } else {
            Issue.record("no entries change")
        }
        try await a.node.merge(try delta(from: b.node), maxSkewMilliseconds: 60_000)
        #expect(try a.node.status().digest == b.node.status().digest)
        // The later write (b's) wins on both.
        #expect(try a.node.preference("controls/slider/sensitivity") == "0.9")
        #expect(try b.node.preference("controls/slider/sensitivity") == "0.9")
    }

    @Test func aPeerTenMinutesAheadIsRefusedAndCannotWinPreferences() async throws {
        let honest = try TemporaryNode()
        let skewed = try TemporaryNode(clock: NodeClock(offsetMilliseconds: 10 * 60 * 1000))
        try await honest.node.set("caregiver/active", to: "\"mum\"")
        try await skewed.node.set("caregiver/active", to: "\"stranger\"")
        let before = try honest.node.status()
        let fromTheFuture = try delta(from: skewed.node)
        do {
            try await honest.node.merge(fromTheFuture, maxSkewMilliseconds: 60_000)
            Issue.record("merged a delta from a clock 10 minutes ahead")
        } catch {
            #expect(error.code == .clockSkew)
            #expect(error.message.contains("clock skew"))
        }
        #expect(try honest.node.status() == before)
        #expect(try honest.node.preference("caregiver/active") == "\"mum\"")
    }

    @Test func largeMergesCompleteAndLeaveNothingOwed() async throws {
        let source = try TemporaryNode()
        let requests = (0..<2_500).map { AppendRequest(stream: "taps", payload: "{\"i\":\($0)}") }
        _ = try await source.node.append(requests)
        let delta = try delta(from: source.node)
        let target = try TemporaryNode()
        let outcome = try await target.node.merge(delta, maxSkewMilliseconds: 60_000)
        #expect(outcome.entriesAdded == 2_500)
        #expect(try target.node.status().digest == source.node.status().digest)
        #expect(try target.node.store.delta(since: target.node.store.versionVector(), maxRows: 10).isEmpty)
        #expect(try source.node.store.delta(since: target.node.store.versionVector(), maxRows: 10).isEmpty)
    }
}

@Suite struct ExportImportTests {
    func export(_ node: LANSyncNode) throws -> String {
        var text = ""
        _ = try ExportFile.write(node, to: { text += $0 })
        return text
    }

    func write(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "lansync-export-\(UUID().uuidString).jsonl"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func populate(_ node: LANSyncNode) async throws {
        try await node.append(
            to: "symbol_taps",
            payload: "{\"symbol_id\":12,\"label\":\"more, please\",\"grid_position\":[2,3]}"
        )
        try await node.append(
            to: "symbol_taps",
            payload: "{\"symbol_id\":4,\"label\":\"=SUM(A1)\",\"note\":\"quote \\\" here\"}"
        )
        try await node.append(to: "sessions", payload: "{\"minutes\":25}", id: "session-am")
        try await node.set("controls/slider/sensitivity", to: "0.7")
        try await node.set("board/layout", to: "{\"rows\":4}")
        try await node.unset("board/layout")
    }

    @Test func exportImportExportKeepsEverything() async throws {
        let source = try TemporaryNode()
        try await populate(source.node)
        let first = try export(source.node)
        let path = try write(first)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let target = try TemporaryNode()
        let report = try ImportFile.run(path, into: target.node)
        #expect(report.entriesRead == 3)
        #expect(report.preferencesRead == 2)
        #expect(try target.node.status().digest == source.node.status().digest)
        let second = try export(target.node)
        // Same records; only the header (exporting device and time) differs.
        #expect(Array(first.split(separator: "\n").dropFirst()) == Array(second.split(separator: "\n").dropFirst()))
        // Importing again is idempotent.
        let again = try ImportFile.run(path, into: target.node)
        #expect(!again.outcome.changedAnything)
    }

    @Test func truncatedOrDamagedFilesImportNothing() async throws {
        let source = try TemporaryNode()
        try await populate(source.node)
        let lines = try export(source.node).split(separator: "\n", omittingEmptySubsequences: false)
        let target = try TemporaryNode()
        let before = try target.node.status()
        let truncated = lines.dropLast(2).joined(separator: "\n") + "\n"
        var damaged = lines
        damaged[2] = "{\"type\":\"entry\",\"id\":"
        let cases = [truncated, damaged.joined(separator: "\n"), "", "hello\n", String(truncated.prefix(150))]
        for text in cases {
            let path = try write(text)
            defer { try? FileManager.default.removeItem(atPath: path) }
            #expect(throws: LANSyncError.self) { try ImportFile.run(path, into: target.node) }
            #expect(try target.node.status() == before)
        }
        #expect(throws: LANSyncError.self) { try ImportFile.run("/nonexistent/export.jsonl", into: target.node) }
    }

    @Test func csvHasOneColumnPerPayloadFieldAndDefusesFormulas() async throws {
        let source = try TemporaryNode()
        try await populate(source.node)
        var csv = ""
        let count = try CSVExport.write(source.node, stream: "symbol_taps", to: { csv += $0 })
        #expect(count == 2)
        let rows = csv.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(rows[0] == "id,time,device_id,grid_position,label,note,symbol_id")
        #expect(rows[1].hasSuffix(",\"[2,3]\",\"more, please\",,12"))
        #expect(rows[2].contains(",'=SUM(A1),\"quote \"\" here\",4"))
    }

    @Test func timestampsAreExactToTheMillisecond() {
        #expect(Timestamps.iso8601(milliseconds: 1_795_239_379_889) == "2026-11-21T05:36:19.889Z")
        #expect(Timestamps.iso8601(milliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamps.iso8601(milliseconds: 951_782_400_000) == "2000-02-29T00:00:00.000Z")
        #expect(Timestamps.iso8601(milliseconds: -1) == "1969-12-31T23:59:59.999Z")
        #expect(Timestamps.milliseconds(iso8601: "2026-11-21T05:36:19.889Z") == 1_795_239_379_889)
        #expect(Timestamps.milliseconds(iso8601: "2026-11-21") == 1_795_219_200_000)
        #expect(Timestamps.milliseconds(iso8601: "yesterday") == nil)
    }
}

/// App tables through the library, as an app uses them: declare, write with GRDB, read, observe.
@Suite struct NodeAppTableTests {
    struct Athlete: Codable, FetchableRecord, PersistableRecord, Equatable {
        static let databaseTableName = "athletes"
        var id: String
        var name: String
        var weightKg: Double?

        enum CodingKeys: String, CodingKey {
            case id, name
            case weightKg = "weight_kg"
        }
    }

    /// AuraLift's first launch: each device seeds the exercise list (`INSERT OR IGNORE`, fixed
    /// keys). A rename on the first device survives the second device's seeding, whichever merges
    /// first, and a seed row deleted on one device stays deleted; as plain inserts, the later
    /// device's seed overwrote the rename everywhere.
    @Test func seedRowsLoseToEveryRealEdit() async throws {
        let schema = "CREATE TABLE exercises (id TEXT PRIMARY KEY, name TEXT NOT NULL, equipment TEXT);"
        let seed =
            "INSERT OR IGNORE INTO exercises (id, name, equipment) VALUES ('e-squat', 'Squat', 'bar'), ('e-lunge', 'Lunge', NULL)"
        /// Everything `from` holds, through the wire's encoding, merged into `to`.
        func send(_ from: LANSyncNode, to: LANSyncNode) async throws {
            let message = WireMessage.delta(try from.store.delta(since: VersionVector(), maxRows: 100))
            guard case .delta(let delta) = try WireMessage.decode(message.wireBytes()) else {
                throw CancellationError()
            }
            try await to.merge(delta, maxSkewMilliseconds: 60_000)
        }
        func names(_ node: LANSyncNode) throws -> [String] {
            try node.read { db in try String.fetchAll(db, sql: "SELECT name FROM exercises ORDER BY id") }
        }
        for (asSeed, firstMerged) in [(true, true), (true, false), (false, true)] {
            let (phone, tablet) = (try TemporaryNode(name: "phone"), try TemporaryNode(name: "tablet"))
            for device in [phone.node, tablet.node] { _ = try device.applySchema(schema) }
            try await phone.node.write(seed: asSeed) { db in try db.execute(sql: seed) }
            try await phone.node.write { db in
                try db.execute(sql: "UPDATE exercises SET name = 'Back squat' WHERE id = 'e-squat'")
            }
            try await phone.node.write { db in try db.execute(sql: "DELETE FROM exercises WHERE id = 'e-lunge'") }
            // The tablet is set up later and seeds the same rows before it ever syncs.
            try await tablet.node.write(seed: asSeed) { db in try db.execute(sql: seed) }
            if firstMerged {
                try await send(phone.node, to: tablet.node)
                try await send(tablet.node, to: phone.node)
            } else {
                try await send(tablet.node, to: phone.node)
                try await send(phone.node, to: tablet.node)
            }
            #expect(try phone.node.status().digest == tablet.node.status().digest)
            if asSeed {
                #expect(try names(phone.node) == ["Back squat"], "the rename and the delete stand over the later seed")
                #expect(try names(tablet.node) == ["Back squat"])
            } else {
                #expect(try names(tablet.node) != ["Back squat"], "a plain insert's later stamp wins every column")
            }
        }
    }

    /// AuraLift's 1:1 machine row and the learning game's progress row, inserted on two devices
    /// before they meet: the later insert leaves a column at its default (NULL, or `DEFAULT 0`),
    /// and that default does not override what the earlier device wrote. A value another device
    /// never wrote stays the default; `INSERT OR REPLACE` over a live row still writes every
    /// column. One row at a time and many rows in one statement (the fast way) alike.
    @Test func anInsertLeavesColumnsAtTheirDefaultToOtherDevicesWrites() async throws {
        let schema = """
            CREATE TABLE machines (id TEXT PRIMARY KEY, brand TEXT, mastery INTEGER NOT NULL DEFAULT 0, note TEXT DEFAULT 'none', seen TEXT DEFAULT CURRENT_TIMESTAMP);
            """
        func rows(_ node: LANSyncNode) throws -> [String] {
            try node.read { db in
                try Row.fetchAll(db, sql: "SELECT id, brand, mastery, note FROM machines ORDER BY id").map(
                    \.description
                )
            }
        }
        let phone = try TemporaryNode(name: "phone")
        let tablet = try TemporaryNode(name: "tablet", clock: NodeClock(offsetMilliseconds: 10_000))
        for device in [phone.node, tablet.node] { _ = try device.applySchema(schema) }
        let bulk = (0..<300).map { "('b\($0)', 'brand \($0)', \($0 % 3))" }.joined(separator: ", ")
        try await phone.node.write { db in
            try db.execute(sql: "INSERT INTO machines (id, brand) VALUES ('m1', 'Life Fitness')")
            try db.execute(sql: "INSERT INTO machines (id, mastery, note) VALUES ('m2', 1, 'left knee')")
            try db.execute(sql: "INSERT INTO machines (id, brand, mastery) VALUES \(bulk)")
        }
        // The tablet, 10 s later by its clock, inserts the same keys naming fewer columns.
        try await tablet.node.write { db in
            try db.execute(sql: "INSERT INTO machines (id, mastery) VALUES ('m1', 2)")
            try db.execute(sql: "INSERT INTO machines (id) VALUES ('m2')")
            try db.execute(
                sql: "INSERT INTO machines (id) VALUES " + (0..<300).map { "('b\($0)')" }.joined(separator: ", ")
            )
        }
        try await phone.node.merge(
            try tablet.node.store.delta(since: VersionVector(), maxRows: 2_000),
            maxSkewMilliseconds: 60_000
        )
        try await tablet.node.merge(
            try phone.node.store.delta(since: VersionVector(), maxRows: 2_000),
            maxSkewMilliseconds: 60_000
        )
        #expect(try phone.node.status().digest == tablet.node.status().digest)
        let merged = try rows(phone.node)
        #expect(try rows(tablet.node) == merged)
        func row(_ id: String) -> String? { merged.first { $0.hasPrefix("[id:\"\(id)\" ") } }
        #expect(row("m1") == "[id:\"m1\" brand:\"Life Fitness\" mastery:2 note:\"none\"]")
        #expect(row("m2") == "[id:\"m2\" brand:NULL mastery:1 note:\"left knee\"]")
        #expect(
            row("b7") == "[id:\"b7\" brand:\"brand 7\" mastery:1 note:\"none\"]",
            "the fast way leaves defaults out too"
        )
        #expect(merged.filter { $0.contains("brand:NULL") }.count == 1, "only m2 never had a brand")

        // A replace over the live row writes every column, defaults included.
        try await tablet.node.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO machines (id, brand) VALUES ('m2', 'Concept2')")
        }
        try await phone.node.merge(
            try tablet.node.store.delta(since: VersionVector(), maxRows: 2_000),
            maxSkewMilliseconds: 60_000
        )
        #expect(
            try rows(phone.node).first { $0.hasPrefix("[id:\"m2\" ") }
                == "[id:\"m2\" brand:\"Concept2\" mastery:0 note:\"none\"]"
        )
    }

    /// The learning game's level progress (`003_…`): a best score that only goes up, a best time
    /// that only goes down, a curriculum day that never goes back. Before `max`/`min`, a later
    /// device's 720 replaced the 980 on every device.
    @Test func maxAndMinColumnsOnlyMoveOneWay() async throws {
        let schema = """
            CREATE TABLE level_progress (id TEXT PRIMARY KEY, best_score INTEGER NOT NULL DEFAULT 0, best_time_ms INTEGER,
                current_day INTEGER NOT NULL DEFAULT 1, stars INTEGER NOT NULL DEFAULT 0);
            -- lansync: max level_progress.best_score
            -- lansync: min level_progress.best_time_ms
            -- lansync: max level_progress.current_day
            """
        func row(_ node: LANSyncNode) throws -> String {
            try node.read { db in
                try Row.fetchOne(db, sql: "SELECT best_score, best_time_ms, current_day, stars FROM level_progress")!
                    .description
            }
        }
        func exchange(_ a: LANSyncNode, _ b: LANSyncNode) async throws {
            try await a.merge(try b.store.delta(since: VersionVector(), maxRows: 100), maxSkewMilliseconds: 60_000)
            try await b.merge(try a.store.delta(since: VersionVector(), maxRows: 100), maxSkewMilliseconds: 60_000)
        }
        let phone = try TemporaryNode(name: "phone")
        let tablet = try TemporaryNode(name: "tablet", clock: NodeClock(offsetMilliseconds: 10_000))
        for device in [phone.node, tablet.node] { _ = try device.applySchema(schema) }
        try await phone.node.write { db in
            try db.execute(sql: "INSERT INTO level_progress VALUES ('L12', 980, 21000, 9, 3)")
        }
        // Apart, and later by its clock, the tablet plays the level worse and is a day behind.
        try await tablet.node.write { db in
            try db.execute(sql: "INSERT INTO level_progress VALUES ('L12', 720, 30000, 8, 2)")
        }
        try await exchange(phone.node, tablet.node)
        #expect(try phone.node.status().digest == tablet.node.status().digest)
        #expect(
            try row(phone.node) == "[best_score:980 best_time_ms:21000 current_day:9 stars:2]",
            "stars is last-writer-wins"
        )
        #expect(try row(tablet.node) == row(phone.node))

        // A write below the best keeps the best, on the writing device at once.
        try await tablet.node.write { db in
            try db.execute(sql: "UPDATE level_progress SET best_score = 500, best_time_ms = 40000")
        }
        #expect(try row(tablet.node) == "[best_score:980 best_time_ms:21000 current_day:9 stars:2]")
        // A better one wins everywhere.
        try await tablet.node.write { db in
            try db.execute(sql: "UPDATE level_progress SET best_score = 1010, best_time_ms = 19500")
        }
        try await exchange(phone.node, tablet.node)
        #expect(try row(phone.node) == "[best_score:1010 best_time_ms:19500 current_day:9 stars:2]")
        #expect(try phone.node.status().digest == tablet.node.status().digest)
        await #expect(throws: LANSyncError.self) {
            try await phone.node.write { db in try db.execute(sql: "UPDATE level_progress SET best_score = 'lots'") }
        }
        // A row inserted with no best yet (NULL, the default) pins nothing: the first real time
        // another device sets is the best.
        try await phone.node.write { db in try db.execute(sql: "INSERT INTO level_progress (id) VALUES ('L13')") }
        try await tablet.node.write { db in
            try db.execute(sql: "INSERT INTO level_progress (id, best_time_ms) VALUES ('L13', 45000)")
        }
        try await exchange(phone.node, tablet.node)
        #expect(
            try phone.node.read { db in
                try Row.fetchOne(
                    db,
                    sql: "SELECT best_score, best_time_ms, current_day FROM level_progress WHERE id = 'L13'"
                )!.description
            }
                == "[best_score:0 best_time_ms:45000 current_day:1]"
        )

        // What a schema may not say.
        for (bad, reason) in [
            ("CREATE TABLE t (id TEXT PRIMARY KEY, best REAL);\n-- lansync: max t.best", "max column t.best is REAL"),
            (
                "-- lansync: append-only t\nCREATE TABLE t (id TEXT PRIMARY KEY, best INTEGER);\n-- lansync: max t.best",
                "append-only"
            ),
            (
                "CREATE TABLE t (id TEXT PRIMARY KEY, best INTEGER);\n-- lansync: max t.best\n-- lansync: counter t.best",
                "already has"
            ),
        ] {
            let error = #expect(throws: AppSchemaError.self, "\(reason)") { _ = try AppSchemaReader.read(bad) }
            #expect(error.map { "\($0)".contains(reason) } == true, "\(String(describing: error))")
        }
        let relaxed = schema.replacingOccurrences(of: "-- lansync: min level_progress.best_time_ms\n", with: "")
        do {
            _ = try phone.node.applySchema(relaxed)
            Issue.record("dropping a min line was accepted")
        } catch {
            #expect("\(error)".contains("best_time_ms merged by minimum"), "\(error)")
        }
    }

    /// The pendulum game's `totalUsageTime` is a Double. A REAL counter counts in millionths:
    /// increments made apart add up to the same bits on every device, whatever order they
    /// merge in, and the writing device shows the rounded sum at once.
    @Test func realCountersAddUpToTheSameBitsEverywhere() async throws {
        let schema = """
            CREATE TABLE usage (id TEXT PRIMARY KEY, total_usage_s REAL NOT NULL DEFAULT 0);
            -- lansync: counter usage.total_usage_s
            """
        func shown(_ node: LANSyncNode) throws -> Double {
            try node.read { db in try Double.fetchOne(db, sql: "SELECT total_usage_s FROM usage WHERE id = 'p1'")! }
        }
        let nodes = [try TemporaryNode(name: "a"), try TemporaryNode(name: "b"), try TemporaryNode(name: "c")]
        for node in nodes { _ = try node.node.applySchema(schema) }
        try await nodes[0].node.write { db in try db.execute(sql: "INSERT INTO usage VALUES ('p1', 1.0000004)") }
        #expect(try shown(nodes[0].node) == 1.0, "the insert's value, in whole millionths")
        for other in nodes.dropFirst() {
            try await other.node.merge(
                try nodes[0].node.store.delta(since: VersionVector(), maxRows: 100),
                maxSkewMilliseconds: 60_000
            )
        }
        // Apart: 0.1 three times on a, 2.25 on b, -0.3333333 on c.
        for _ in 0..<3 {
            try await nodes[0].node.write { db in
                try db.execute(sql: "UPDATE usage SET total_usage_s = total_usage_s + 0.1")
            }
        }
        try await nodes[1].node.write { db in
            try db.execute(sql: "UPDATE usage SET total_usage_s = total_usage_s + 2.25")
        }
        try await nodes[2].node.write { db in
            try db.execute(sql: "UPDATE usage SET total_usage_s = total_usage_s - 0.3333333")
        }
        #expect(try shown(nodes[2].node) == 0.666667, "the writing device shows the rounded sum")
        for (from, to) in [(0, 1), (2, 1), (1, 0), (1, 2)] {
            try await nodes[to].node.merge(
                try nodes[from].node.store.delta(since: VersionVector(), maxRows: 100),
                maxSkewMilliseconds: 60_000
            )
        }
        let expected = Double(1_000_000 + 300_000 + 2_250_000 - 333_333) / 1_000_000
        for node in nodes {
            let value = try shown(node.node)
            #expect(value.bitPattern == expected.bitPattern, "\(value) against \(expected)")
        }
        await #expect(throws: LANSyncError.self) {
            try await nodes[0].node.write { db in try db.execute(sql: "UPDATE usage SET total_usage_s = 1e300") }
        }
    }

    /// A parent deleted on one device while a child was added on another leaves the child
    /// behind on both once they meet: `orphans` lists it, with its key and its parent's table.
    @Test func aChildWhoseParentWasDeletedElsewhereIsListedAsAnOrphan() async throws {
        let schema = """
            CREATE TABLE sessions (id TEXT PRIMARY KEY, started TEXT);
            CREATE TABLE sets (id TEXT PRIMARY KEY, session_id TEXT REFERENCES sessions(id), reps INTEGER);
            """
        let (phone, tablet) = (try TemporaryNode(name: "phone"), try TemporaryNode(name: "tablet"))
        for device in [phone.node, tablet.node] { _ = try device.applySchema(schema) }
        try await phone.node.write { db in
            try db.execute(sql: "INSERT INTO sessions (id, started) VALUES ('s1', 'today')")
        }
        try await tablet.node.merge(
            try phone.node.store.delta(since: VersionVector(), maxRows: 100),
            maxSkewMilliseconds: 60_000
        )
        #expect(try tablet.node.orphans().isEmpty)
        // Apart: the phone deletes the session, the tablet adds a set to it.
        try await phone.node.write { db in try db.execute(sql: "DELETE FROM sessions WHERE id = 's1'") }
        try await tablet.node.write { db in
            try db.execute(sql: "INSERT INTO sets (id, session_id, reps) VALUES ('x1', 's1', 8)")
        }
        try await phone.node.merge(
            try tablet.node.store.delta(since: VersionVector(), maxRows: 100),
            maxSkewMilliseconds: 60_000
        )
        try await tablet.node.merge(
            try phone.node.store.delta(since: VersionVector(), maxRows: 100),
            maxSkewMilliseconds: 60_000
        )
        for device in [phone.node, tablet.node] {
            #expect(try device.orphans() == [AppOrphan(table: "sets", key: ["x1"], parent: "sessions")])
        }
        try await tablet.node.write { db in try db.execute(sql: "DELETE FROM sets WHERE id = 'x1'") }
        #expect(try tablet.node.orphans().isEmpty, "deleting the orphan settles it")
    }

    /// A live query sees rows another process commits to the replica: the agent merging a
    /// peer's rows as `lansync run`, or the CLI. Here the other process is a second node opened
    /// on the same directory (its own connections, which SQLite does not report to the first),
    /// and the row arrives by a merge, as a peer's does. Before the node watched its replica's
    /// files, the observation never fired again.
    @Test func aLiveQuerySeesRowsAnotherProcessMerges() async throws {
        let temporary = try TemporaryNode()
        let app = temporary.node
        _ = try app.applySchema(
            "CREATE TABLE athletes (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', weight_kg REAL);"
        )
        let agent = try LANSyncNode.open(at: app.dataDirectory)
        let peer = try TemporaryNode(name: "peer")
        _ = try peer.node.applySchema(
            "CREATE TABLE athletes (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', weight_kg REAL);"
        )
        try await peer.node.write { db in try Athlete(id: "p1", name: "Pia", weightKg: 55).insert(db) }

        final class Latest: Sendable {
            let rows = Mutex<[Athlete]?>(nil)
            func withLock<T>(_ body: (inout [Athlete]?) -> T) -> T { rows.withLock { body(&$0) } }
        }
        let latest = Latest()
        let database = app.database
        let observing = Task {
            for try await rows in ValueObservation.tracking({ db in try Athlete.fetchAll(db) }).values(in: database) {
                latest.withLock { $0 = rows }
            }
        }
        defer { observing.cancel() }
        /// Whether the observation shows `ids` within a generous deadline (never a fixed wait).
        func shows(_ ids: [String]) async -> Bool {
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline {
                if latest.withLock({ $0?.map(\.id).sorted() }) == ids { return true }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return false
        }
        #expect(await shows([]))
        try await agent.merge(
            try peer.node.store.delta(since: VersionVector(), maxRows: 100),
            maxSkewMilliseconds: 60_000
        )
        #expect(await shows(["p1"]), "the merged row reached the live query")
        #expect(latest.withLock { $0 } == [Athlete(id: "p1", name: "Pia", weightKg: 55)])
        try await agent.write { db in try Athlete(id: "a2", name: "Ari").insert(db) }
        #expect(await shows(["a2", "p1"]), "and so does another process's own write")
    }

    @Test func recordsWriteReadAndObservationSeesCommits() async throws {
        let temporary = try TemporaryNode()
        let node = temporary.node
        let added = try node.applySchema(
            "CREATE TABLE athletes (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', weight_kg REAL);"
        )
        #expect(added == ["add mutable table athletes (3 columns)"])
        let changes = node.changes()
        var seen = ValueObservation.tracking { db in try Athlete.fetchAll(db) }.removeDuplicates().values(
            in: node.database
        ).makeAsyncIterator()
        #expect(try await seen.next() == [])
        try await node.write { db in try Athlete(id: "a1", name: "Ana", weightKg: 60).insert(db) }
        let afterInsert = try await seen.next()
        #expect(afterInsert == [Athlete(id: "a1", name: "Ana", weightKg: 60)], "\(String(describing: afterInsert))")
        var iterator = changes.makeAsyncIterator()
        if case .rows(_, let local) = await iterator.next() { #expect(local) } else { Issue.record("no change event") }
        try await node.write { db in
            var athlete = try Athlete.fetchOne(db, key: "a1")!
            athlete.weightKg = 61.5
            try athlete.update(db)
        }
        #expect(try node.read { db in try Athlete.fetchOne(db, key: "a1")?.weightKg } == 61.5)
        #expect(try node.status().tables.map(\.rows) == [1])
        // The app's own error comes back as is, and nothing of that write stays.
        struct Cancelled: Error {}
        await #expect(throws: Cancelled.self) {
            try await node.write { db in
                try Athlete(id: "b2", name: "Ben").insert(db)
                throw Cancelled()
            }
        }
        // SQLite's errors are LANSyncErrors of code .sql.
        await #expect {
            try await node.write { db in try db.execute(sql: "INSERT INTO nowhere VALUES (1)") }
        } throws: { error in
            (error as? LANSyncError)?.code == .sql
        }
        #expect(try node.read { db in try Athlete.fetchCount(db) } == 1)
        // Writing through the observation database is refused: every write goes through `write`.
        #expect(throws: (any Error).self) {
            try (node.database as! any DatabaseWriter).write { db in try Athlete(id: "c3", name: "C").insert(db) }
        }
    }
}

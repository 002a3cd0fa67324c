import Foundation
import Testing

/// What the users of the five seed apps (../shared/seeds/) do with their data, on nodes made of
/// namespaces that find each other by mDNS: each app's example schema (docs/examples/), applied
/// together on three machines, then each app's story of edits while apart, live updates, deletes,
/// counters and appends. Each scenario prints its figures.
@Suite(.serialized, .enabled(if: Cluster.isAvailable, "\(Cluster.unavailableReason ?? "")"))
struct SeedAppScenarioTests {
    static let examples = URL(fileURLWithPath: Cluster.root + "/docs/examples")
    static let apps = ["aac-board", "pendulum", "auralift", "learning-games", "rowing"]

    static func schema(_ app: String) throws -> String {
        try String(contentsOf: examples.appendingPathComponent(app + ".sql"), encoding: .utf8)
    }

    /// Rows of a query on a node, as JSON objects.
    static func query(_ cluster: Cluster, _ node: Int, _ sql: String) async throws -> [[String: Any]] {
        try await cluster.lansync(node, "query", sql, "--json").split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
    }

    static func value(_ cluster: Cluster, _ node: Int, _ sql: String) async throws -> Any? {
        try await query(cluster, node, sql).first?.values.first
    }

    /// Waits for equal digests and returns how long it took, in milliseconds.
    static func converge(_ cluster: Cluster, _ nodes: [Int] = [1, 2, 3], timeout: Int = 60) async throws -> Int {
        let start = ContinuousClock.now
        try await cluster.ok(["wait-sync"] + nodes.map(String.init) + ["--timeout", "\(timeout)"])
        let elapsed = ContinuousClock.now - start
        return Int(elapsed.components.seconds * 1_000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
    }

    static func report(_ text: String) { print("scenario: " + text) }

    @Test func theSeedAppsUsersStoriesOnThreeMachines() async throws {
        let cluster = Cluster(prefix: "lss3")
        defer { cluster.down() }
        try await cluster.ok("up", "3")
        try await cluster.group(1...3)
        // Every app's schema, applied together on each machine.
        let combined = try Self.apps.map(Self.schema).joined(separator: "\n")
        for node in 1...3 { _ = try await cluster.ok(["lansync", "\(node)", "schema", "apply", "-"], stdin: combined) }
        for node in 1...3 { try await cluster.ok("start", "\(node)") }
        try await cluster.lansync(
            1,
            "exec",
            "INSERT INTO athletes (id, name) VALUES ('7c1e0a52-0000-4000-8000-000000000001', 'Ana')"
        )
        Self.report("first convergence of 3 nodes by mDNS: \(try await Self.converge(cluster)) ms")

        // AuraLift: the phone and the tablet edit one profile while apart; both edits survive,
        // and XP earned on both adds up (NSMergeByPropertyObjectTrumpMergePolicy).
        let profile = "a1a1a1a1-0000-4000-8000-000000000001"
        try await cluster.lansync(
            1,
            "exec",
            "INSERT INTO user_profiles (id, username, total_xp) VALUES ('\(profile)', 'ana', 100)"
        )
        _ = try await Self.converge(cluster)
        try await cluster.ok("partition", "1")
        try await cluster.lansync(
            1,
            "exec",
            "UPDATE user_profiles SET username = 'ana_lifts', total_xp = total_xp + 50 WHERE id = '\(profile)'"
        )
        try await cluster.lansync(
            2,
            "exec",
            "UPDATE user_profiles SET weight_kg = 61.5, total_xp = total_xp + 30 WHERE id = '\(profile)'"
        )
        try await cluster.ok("heal")
        Self.report(
            "AuraLift: profile edited apart (name on 1, weight on 2), in sync \(try await Self.converge(cluster)) ms after the heal"
        )
        for node in 1...3 {
            let row = try await Self.query(cluster, node, "SELECT username, weight_kg, total_xp FROM user_profiles")
                .first
            #expect(row?["username"] as? String == "ana_lifts")
            #expect(row?["weight_kg"] as? Double == 61.5)
            #expect(row?["total_xp"] as? Int == 180)
        }

        // AuraLift's first launch seeds the exercise list on every device (`exec --seed`): the
        // user renames a seeded exercise on 1; node 3, offline meanwhile, seeds the same rows when
        // its app starts. The rename stands everywhere once 3 is back.
        let seedSQL =
            "INSERT OR IGNORE INTO exercises (id, name, equipment_type) VALUES "
            + "('e0e0e0e0-0000-5000-8000-000000000001', 'Squat', 'barbell'), ('e0e0e0e0-0000-5000-8000-000000000002', 'Lunge', NULL)"
        try await cluster.lansync(1, "exec", "--seed", seedSQL)
        try await cluster.ok("link", "3", "down")
        try await cluster.lansync(
            1,
            "exec",
            "UPDATE exercises SET name = 'Back squat' WHERE id = 'e0e0e0e0-0000-5000-8000-000000000001'"
        )
        _ = try await Self.converge(cluster, [1, 2])
        try await cluster.lansync(3, "exec", "--seed", seedSQL)
        try await cluster.ok("link", "3", "up")
        Self.report(
            "AuraLift: a seeded exercise renamed on 1 while 3 seeded the list offline, in sync \(try await Self.converge(cluster)) ms after 3 came back"
        )
        for node in 1...3 {
            let names = try await Self.query(cluster, node, "SELECT name FROM exercises ORDER BY id").compactMap {
                $0["name"] as? String
            }
            #expect(names == ["Back squat", "Lunge"], "node \(node): \(names)")
        }

        // Learning games: three offline devices each add a session and play time; the totals sum.
        // Each also plays level L12: the high score only goes up and the best time only down
        // (`max`, `min`), so the last device's worse play does not replace the best.
        try await cluster.lansync(1, "exec", "INSERT INTO game_progress (game_id) VALUES ('shapes')")
        try await cluster.lansync(1, "exec", "INSERT INTO level_scores (game_id, level_id) VALUES ('shapes', 'L12')")
        _ = try await Self.converge(cluster)
        for node in 1...3 { try await cluster.ok("link", "\(node)", "down") }
        for node in 1...3 {
            try await cluster.lansync(
                node,
                "exec",
                "UPDATE game_progress SET total_sessions = total_sessions + 1, total_play_time_ms = total_play_time_ms + \(node * 1000) "
                    + "WHERE game_id = 'shapes'",
                "UPDATE level_scores SET high_score = \([980, 720, 850][node - 1]), best_completion_time_ms = \([21_000, 30_000, 25_000][node - 1]) "
                    + "WHERE level_id = 'L12'"
            )
        }
        for node in 1...3 { try await cluster.ok("link", "\(node)", "up") }
        Self.report(
            "learning games: XP on three offline devices, in sync \(try await Self.converge(cluster)) ms after the links came back"
        )
        for node in 1...3 {
            let row = try await Self.query(
                cluster,
                node,
                "SELECT total_sessions, total_play_time_ms FROM game_progress"
            ).first
            #expect(row?["total_sessions"] as? Int == 3)
            #expect(row?["total_play_time_ms"] as? Int == 6_000)
            let level = try await Self.query(
                cluster,
                node,
                "SELECT high_score, best_completion_time_ms FROM level_scores"
            ).first
            #expect(level?["high_score"] as? Int == 980, "node \(node): \(String(describing: level))")
            #expect(level?["best_completion_time_ms"] as? Int == 21_000)
        }

        // Rowing: a session updated every second on node 1 while node 2 adds notes.
        let athlete = "7c1e0a52-0000-4000-8000-000000000001"
        let session = "5e55e55e-0000-4000-8000-000000000001"
        try await cluster.lansync(
            1,
            "exec",
            "INSERT INTO rowing_sessions (id, athlete_id, start_time) VALUES ('\(session)', '\(athlete)', 1000)"
        )
        for second in 1...5 {
            try await cluster.lansync(
                1,
                "exec",
                "UPDATE rowing_sessions SET end_time = \(1000 + second * 1000), total_distance_m = \(Double(second) * 4.5) WHERE id = '\(session)'"
            )
            if second == 2 {
                try await cluster.lansync(
                    2,
                    "exec",
                    "UPDATE rowing_sessions SET notes = 'steady 2k' WHERE id = '\(session)'"
                )
            }
            try? await Task.sleep(for: .milliseconds(1000))
        }
        try await cluster.lansync(1, "exec", "UPDATE rowing_sessions SET is_complete = 1 WHERE id = '\(session)'")
        Self.report(
            "rowing: session updated every second on 1, notes on 2, in sync \(try await Self.converge(cluster)) ms after the last update"
        )
        for node in 1...3 {
            let row = try await Self.query(
                cluster,
                node,
                "SELECT end_time, total_distance_m, notes, is_complete FROM rowing_sessions"
            ).first
            #expect(row?["end_time"] as? Int == 6_000)
            #expect(row?["total_distance_m"] as? Double == 22.5)
            #expect(row?["notes"] as? String == "steady 2k")
            #expect(row?["is_complete"] as? Int == 1)
        }

        // Rowing: per-stroke metrics appended at 50 rows/s on node 1 reach the others live.
        let strokes = 200
        var seenLive = 0
        for batch in 0..<(strokes / 5) {
            let values = (0..<5).map { index -> String in
                let stroke = batch * 5 + index
                return
                    "('m-\(stroke)', '\(session)', \(stroke * 20), \(Double(stroke) * 2.1), 120.0, 24, 250.5, \(stroke), "
                    + "'drive', 0.8, 1.7, 1.45, 610.0, 420.0, 355.2)"
            }.joined(separator: ", ")
            let start = ContinuousClock.now
            try await cluster.lansync(
                1,
                "exec",
                "INSERT INTO performance_metrics (id, session_id, timestamp, distance_m, pace_s, stroke_rate, power_w, stroke_count, "
                    + "stroke_phase, drive_time_s, recovery_time_s, stroke_length_m, peak_force, average_force, work_per_stroke_j) "
                    + "VALUES \(values)"
            )
            if batch == strokes / 10 {
                seenLive = try await Self.value(cluster, 3, "SELECT count(*) FROM performance_metrics") as? Int ?? 0
            }
            let left = Duration.milliseconds(100) - (ContinuousClock.now - start)
            if left > .zero { try? await Task.sleep(for: left) }
        }
        let lag = try await Self.converge(cluster)
        Self.report(
            "rowing: \(strokes) metrics at 50 rows/s on 1; node 3 held \(seenLive) of the first \(strokes / 2 + 5) "
                + "halfway through; all in sync \(lag) ms after the last"
        )
        #expect(seenLive >= strokes / 4, "metrics arrive while they are written, not after")
        for node in 2...3 {
            #expect(try await Self.value(cluster, node, "SELECT count(*) FROM performance_metrics") as? Int == strokes)
        }

        // Rowing: a session deleted on one device while edited on another: the delete wins.
        try await cluster.ok("partition", "1")
        try await cluster.lansync(1, "exec", "DELETE FROM rowing_sessions WHERE id = '\(session)'")
        try await cluster.lansync(
            2,
            "exec",
            "UPDATE rowing_sessions SET notes = 'edited while deleted' WHERE id = '\(session)'"
        )
        try await cluster.ok("heal")
        Self.report(
            "rowing: session deleted on 1 while edited on 2, in sync \(try await Self.converge(cluster)) ms after the heal"
        )
        for node in 1...3 {
            #expect(try await Self.value(cluster, node, "SELECT count(*) FROM rowing_sessions") as? Int == 0)
            // Its metrics are append-only and declared ON DELETE CASCADE: they went with it, everywhere.
            #expect(try await Self.value(cluster, node, "SELECT count(*) FROM performance_metrics") as? Int == 0)
        }

        // Pendulum: preferences edited on two devices at once merge per field; inputs arrive in batches.
        try await cluster.lansync(
            1,
            "exec",
            "INSERT INTO control_preferences (device_id, control_type) VALUES ('ipad', 'tilt')"
        )
        _ = try await Self.converge(cluster)
        try await cluster.ok("partition", "3")
        try await cluster.lansync(
            1,
            "exec",
            "UPDATE control_preferences SET sensitivity = 0.8 WHERE device_id = 'ipad'"
        )
        try await cluster.lansync(3, "exec", "UPDATE control_preferences SET is_enabled = 0 WHERE device_id = 'ipad'")
        let inputs = (0..<100).map { "('in-\($0)', 'cs-1', \($0 * 16), 'tilt', '{}', 0.4, 'left', 12.5, 0.3, 180.0)" }
            .joined(separator: ", ")
        try await cluster.lansync(
            2,
            "exec",
            "INSERT INTO control_inputs (input_id, session_id, timestamp, control_type, input_data, force_applied, direction, "
                + "pendulum_angle, pendulum_velocity, response_time_ms) VALUES \(inputs)"
        )
        try await cluster.ok("heal")
        Self.report(
            "pendulum: per-field preference edits on 1 and 3 and a batch of 100 inputs on 2, in sync "
                + "\(try await Self.converge(cluster)) ms after the heal"
        )
        for node in 1...3 {
            let row = try await Self.query(cluster, node, "SELECT sensitivity, is_enabled FROM control_preferences")
                .first
            #expect(row?["sensitivity"] as? Double == 0.8)
            #expect(row?["is_enabled"] as? Int == 0)
            #expect(try await Self.value(cluster, node, "SELECT count(*) FROM control_inputs") as? Int == 100)
        }

        // AAC board: taps logged on two devices while apart, none lost or doubled; a caregiver renamed.
        try await cluster.lansync(
            1,
            "exec",
            "INSERT INTO caregiver_profiles (id, name, role) VALUES ('cg-1', 'Mum', 'mom')"
        )
        _ = try await Self.converge(cluster)
        try await cluster.ok("partition", "1")
        for node in 1...2 {
            let taps = (0..<30).map {
                "('tap-\(node)-\($0)', \(1_763_800_000_000 + $0 * 500), 'sym-\($0 % 12)', 'more', 'EN', 'core/actions', 2, 3, "
                    + "'s-\(node)', 'dev-\(node)', 'cg-1')"
            }.joined(separator: ", ")
            try await cluster.lansync(
                node,
                "exec",
                "INSERT INTO symbol_taps (id, timestamp, symbol_id, symbol_label_displayed, language_setting, category_path, grid_row, "
                    + "grid_col, session_id, device_id, caregiver_profile_id) VALUES \(taps)"
            )
        }
        try await cluster.lansync(2, "exec", "UPDATE caregiver_profiles SET name = 'Mum (Sara)' WHERE id = 'cg-1'")
        try await cluster.ok("heal")
        Self.report(
            "AAC board: 30 taps on each of two devices apart, in sync \(try await Self.converge(cluster)) ms after the heal"
        )
        for node in 1...3 {
            #expect(try await Self.value(cluster, node, "SELECT count(DISTINCT id) FROM symbol_taps") as? Int == 60)
            #expect(
                try await Self.value(cluster, node, "SELECT name FROM caregiver_profiles") as? String == "Mum (Sara)"
            )
        }
    }
}

/// A node with an older schema between two with the newer one. A suite of its own so that it runs
/// beside the seed apps' stories rather than after them.
@Suite(.serialized, .enabled(if: Cluster.isAvailable, "\(Cluster.unavailableReason ?? "")"))
struct MixedSchemaScenarioTests {
    /// The seed apps' schemas, queries and convergence wait.
    private typealias Apps = SeedAppScenarioTests

    /// A–B–C in a line, B running an older app version: B keeps and relays the changes to a column
    /// its schema lacks, so A's writes reach C; B shows them once its app declares the column.
    @Test func anOlderSchemaInTheMiddleOfALineRelaysWhatItDoesNotKnow() async throws {
        let cluster = Cluster(prefix: "lsl3")
        defer { cluster.down() }
        try await cluster.ok("up", "3", "--line")
        try await cluster.group(1...3)
        let older = try Apps.schema("rowing")
        let newer = older.replacingOccurrences(
            of: "    notes TEXT,\n",
            with: "    notes TEXT,\n    coach_comment TEXT,\n"
        )
        #expect(newer != older)
        _ = try await cluster.ok(["lansync", "1", "schema", "apply", "-"], stdin: newer)
        _ = try await cluster.ok(["lansync", "2", "schema", "apply", "-"], stdin: older)
        _ = try await cluster.ok(["lansync", "3", "schema", "apply", "-"], stdin: newer)
        for node in 1...3 { try await cluster.ok("start", "\(node)") }
        let session = "5e55e55e-0000-4000-8000-0000000000aa"
        try await cluster.lansync(
            1,
            "exec",
            "INSERT INTO rowing_sessions (id, coach_comment) VALUES ('\(session)', 'long slow distance')"
        )
        Apps.report(
            "line A-B-C, B on the older schema: C has A's new column \(try await Apps.converge(cluster)) ms after the write"
        )
        #expect(
            try await Apps.value(cluster, 3, "SELECT coach_comment FROM rowing_sessions") as? String
                == "long slow distance"
        )
        #expect(try await Apps.value(cluster, 2, "SELECT count(*) FROM rowing_sessions") as? Int == 1)
        let unknown = try await cluster.run(["lansync", "2", "query", "SELECT coach_comment FROM rowing_sessions"])
        #expect(unknown.status != 0, "B's app does not declare the column: \(unknown.output)")
        // B's app is updated: the column appears with the value it relayed.
        _ = try await cluster.ok(["lansync", "2", "schema", "apply", "-"], stdin: newer)
        #expect(
            try await Apps.value(cluster, 2, "SELECT coach_comment FROM rowing_sessions") as? String
                == "long slow distance"
        )
    }
}

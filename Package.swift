// swift-tools-version: 6.1
// LANSync: a peer-to-peer LAN sync agent. Each target has one job; dependencies point down:
//
//   lansync (CLI), lansync-bench                 lansync-simulate
//   LANSyncLocalAPI (HTTP API, dashboard)        LANSyncSimulation
//   LANSyncAgent ── LANSyncTransport (SwiftNIO), LANSyncDiscovery, LANSyncPairing; LANSyncSession ── LANSyncWire
//   LANSync (the embeddable node) ── LANSyncStore (GRDB), LANSyncIdentity ── LANSyncCrypto (libsodium)
//   LANSyncCore: pure Swift with no I/O; the CRDT laws live there and nowhere else.
//
// docs/architecture.md draws it, walks one write from an app to a peer, and says where each
// policy lives.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "lansync",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LANSync", targets: ["LANSync"]),
        // Sync inside an app's own process: `Agent`, the service `lansync run` runs.
        .library(name: "LANSyncAgent", targets: ["LANSyncAgent"]),
        // The local HTTP API and dashboard beside an in-process `Agent`: `LocalAPI`.
        .library(name: "LANSyncLocalAPI", targets: ["LANSyncLocalAPI"]),
        .executable(name: "lansync", targets: ["lansync"]),
        .executable(name: "lansync-bench", targets: ["lansync-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // The local HTTP API's server. Without its default traits: no swift-configuration, no full Foundation.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        // `swift package generate-documentation`: the DocC reference of the three library products.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // libsodium, as the system library Debian's libsodium-dev provides.
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // Zstandard as the system library Debian's libzstd-dev provides: compression of large wire messages.
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        // One sqlite3_config call Swift cannot make itself (the function is variadic); see SQLiteProcessSettings+SQLite.swift.
        .systemLibrary(name: "CSQLiteConfig"),
        // A policy in front of GRDB's SQLite authorizer: what an app's SQL may touch (AppSQLGuard).
        .target(name: "CSQLiteAuthorizer", linkerSettings: [.linkedLibrary("sqlite3")]),
        // libavahi-client, as Debian's libavahi-client-dev provides: mDNS through the system's avahi-daemon.
        .systemLibrary(name: "CAvahi", pkgConfig: "avahi-client", providers: [.apt(["libavahi-client-dev"])]),
        // CRDT core: HLC, version vectors, entries, LWW registers, deltas, digests. No I/O.
        .target(name: "LANSyncCore", swiftSettings: strict),
        // Hashing, key pairs and secret buffers over libsodium.
        .target(name: "LANSyncCrypto", dependencies: ["CSodium"], swiftSettings: strict),
        // The wire protocol: message types, delta encoding, framing. Core and zstd only, so fuzzers build fast.
        .target(name: "LANSyncWire", dependencies: ["LANSyncCore", "CZstd"], swiftSettings: strict),
        // Device identity: the stable device ID, the long-term key pair, the identity file.
        .target(name: "LANSyncIdentity", dependencies: ["LANSyncCore", "LANSyncCrypto"], swiftSettings: strict),
        // The SQLite replica: schema, durable writes, merge of deltas, queries.
        .target(
            name: "LANSyncStore",
            dependencies: [
                "LANSyncCore",
                "LANSyncCrypto",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for the statements on hot paths (BoundStatement+SQLite.swift).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                "CSQLiteConfig",
                "CSQLiteAuthorizer",
            ],
            swiftSettings: strict
        ),
        // The embeddable node: what an app links against.
        .target(
            name: "LANSync",
            dependencies: [
                "LANSyncCore",
                "LANSyncStore",
                "LANSyncIdentity",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The sync protocol with one peer as a pure state machine: events in, actions out, no I/O.
        .target(name: "LANSyncSession", dependencies: ["LANSyncCore", "LANSyncWire"], swiftSettings: strict),
        // Pairing by short code: CPace runs as pure state machines, and the window's attempt count.
        .target(name: "LANSyncPairing", dependencies: ["LANSyncCore", "LANSyncCrypto", "LANSyncWire"], swiftSettings: strict),
        // mDNS advertising and browsing through avahi-daemon, as a Swift stream of events. The C
        // interop lives in one file (AvahiConnection+Avahi.swift).
        .target(name: "LANSyncDiscovery", dependencies: ["CAvahi"], swiftSettings: strict),
        // The transport under a session: the Noise handshake over framed TCP, sealed frames each
        // way, serving accepted connections, timers on the event loop, threads for bulk work.
        .target(
            name: "LANSyncTransport",
            dependencies: [
                "LANSyncCrypto",
                "LANSyncWire",
                "LANSyncSession",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
            ],
            swiftSettings: strict
        ),
        // The running node: its parts as services (listener, sessions, dialing, discovery,
        // pairing, the control socket) over the transport.
        .target(
            name: "LANSyncAgent",
            dependencies: [
                "LANSyncTransport",
                "LANSync",
                "LANSyncCore",
                "LANSyncStore",
                "LANSyncCrypto",
                "LANSyncIdentity",
                "LANSyncWire",
                "LANSyncSession",
                "LANSyncDiscovery",
                "LANSyncPairing",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The local HTTP API (Hummingbird): what the CLI can do, for apps in any language and the dashboard.
        .target(
            name: "LANSyncLocalAPI",
            dependencies: [
                "LANSync",
                "LANSyncCore",
                "LANSyncStore",
                "LANSyncAgent",
                .product(name: "Hummingbird", package: "hummingbird"),
                // The HTTP/1 server's settings: idle timeout, connection bound.
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                // The servers' event loops, and the parse error that ends a connection (APIServer).
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // The HTTP parts a channel handler sees (ConnectionBoundHandler).
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "lansync",
            dependencies: [
                "LANSyncAgent",
                "LANSyncLocalAPI",
                "LANSyncDiscovery",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // LANSync re-exports Core and Store; naming them keeps incremental builds honest
                // (without it a change to a Store type's layout was not recompiled into the CLI).
                "LANSync",
                "LANSyncCore",
                "LANSyncStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Benchmarks with same-run baselines (raw SQLite inserts of the same rows).
        .executableTarget(
            name: "lansync-bench",
            dependencies: [
                "LANSync",
                "LANSyncAgent",
                "LANSyncLocalAPI",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                "LANSyncCore",
                "LANSyncCrypto",
                "LANSyncStore",
                "LANSyncWire",
                "LANSyncSession",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The baseline binds through SQLite's C API (Baseline.swift).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        // The README's in-process sync program, built and run by the tests.
        .executableTarget(
            name: "lansync-example-taps",
            dependencies: [
                "LANSync", "LANSyncAgent", "LANSyncLocalAPI", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/TapLogger", swiftSettings: strict),
        // Shared by the test targets: generated histories of replicas for property tests, and
        // running a program from a test without holding a thread of the cooperative pool.
        .target(
            name: "LANSyncTestSupport",
            dependencies: ["LANSyncCore", "LANSyncStore", "LANSyncSession", "LANSyncWire", "LANSyncPairing", "LANSyncCrypto"],
            swiftSettings: strict),
        // libFuzzer target for every decoder of network bytes: only the entry point lives here.
        .executableTarget(
            name: "lansync-fuzz-wire", dependencies: ["LANSyncWire", "LANSyncCore", "LANSyncCrypto"],
            swiftSettings: strict),
        .testTarget(
            name: "LANSyncCoreTests",
            dependencies: [
                "LANSyncCore",
                "LANSyncCrypto",
                "LANSyncTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LANSyncPairingTests",
            dependencies: ["LANSyncPairing", "LANSyncCrypto", "LANSyncWire", "LANSyncCore", "LANSyncTestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "LANSyncCryptoTests",
            dependencies: ["LANSyncCrypto"],
            // The published Noise test vectors (cacophony) for the SHA-256 patterns.
            resources: [.copy("Resources/noise-vectors.json")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LANSyncWireTests",
            dependencies: [
                "LANSyncWire",
                "LANSyncCore",
                "LANSyncTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "LANSyncDiscoveryTests", dependencies: ["LANSyncDiscovery"], swiftSettings: strict),
        .testTarget(
            name: "LANSyncTransportTests",
            dependencies: [
                "LANSyncTransport", "LANSyncCore", "LANSyncCrypto", "LANSyncWire",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LANSyncAgentTests",
            dependencies: [
                "LANSyncAgent", "LANSyncTransport", "LANSyncDiscovery", "LANSyncCore", "LANSyncCrypto", "LANSyncWire",
                "LANSync", "LANSyncIdentity", "LANSyncTestSupport", .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict),
        // libFuzzer target for the sync session: scripts of extreme messages through the state
        // machine into a real replica (SessionFuzzing).
        .executableTarget(
            name: "lansync-fuzz-session", dependencies: ["LANSyncTestSupport"], swiftSettings: strict),
        // The group simulator: whole groups of real nodes on a simulated network and clock, one
        // seed per run (GroupSimulation); `lansync-simulate` runs many seeds.
        .target(
            name: "LANSyncSimulation",
            dependencies: [
                "LANSync", "LANSyncCore", "LANSyncCrypto", "LANSyncIdentity", "LANSyncSession", "LANSyncStore", "LANSyncWire",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict),
        .executableTarget(
            name: "lansync-simulate",
            dependencies: ["LANSyncSimulation", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strict),
        .testTarget(name: "LANSyncSimulationTests", dependencies: ["LANSyncSimulation"], swiftSettings: strict),
        // The namespace cluster's tampering relay: an agent that alters the changes it relays.
        .executableTarget(
            name: "lansync-tamper-relay",
            dependencies: [
                "LANSync", "LANSyncAgent", "LANSyncCore", "LANSyncWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "LANSyncSessionTests",
            dependencies: [
                "LANSyncSession", "LANSyncCore", "LANSyncCrypto", "LANSyncWire", "LANSyncTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict),
        .testTarget(name: "LANSyncIdentityTests", dependencies: ["LANSyncIdentity", "LANSyncCore"], swiftSettings: strict),
        .testTarget(
            name: "LANSyncStoreTests",
            dependencies: [
                "LANSyncStore",
                "LANSyncCrypto",
                "LANSyncTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LANSyncTests", dependencies: ["LANSync", "LANSyncCore", "LANSyncStore", "LANSyncCrypto", "LANSyncIdentity", "LANSyncWire", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: strict),
        // Runs the built `lansync` executable the way a user would.
        .testTarget(
            name: "LANSyncCLITests", dependencies: ["LANSync", "LANSyncLocalAPI", "LANSyncTestSupport"], exclude: ["python"],
            swiftSettings: strict),
        .testTarget(
            name: "LANSyncLocalAPITests",
            dependencies: [
                "LANSyncLocalAPI", "LANSync", "LANSyncAgent", "LANSyncCore", "LANSyncTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)

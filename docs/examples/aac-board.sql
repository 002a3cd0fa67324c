-- The AAC communication board's usage logging (../shared/seeds/002_…) as app tables. (LANSync's
-- streams serve its logs today — `lansync log append symbol_taps …`; this is the same data for an
-- app that prefers SQL.) Taps and phrase completions are append-only logs; a session's summary
-- is updated while it runs; caregiver profiles are edited on any device, field by field.
-- Timestamps are ms since the epoch; lists are JSON text.

-- lansync: append-only symbol_taps
CREATE TABLE symbol_taps (
    id TEXT PRIMARY KEY,                 -- a UUID made on the tapping device
    timestamp INTEGER NOT NULL,
    symbol_id TEXT NOT NULL,
    symbol_label_displayed TEXT NOT NULL,
    language_setting TEXT NOT NULL CHECK (language_setting IN ('BG', 'EN')),
    category_path TEXT NOT NULL,
    grid_row INTEGER NOT NULL,
    grid_col INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    device_id TEXT NOT NULL,
    caregiver_profile_id TEXT
);
CREATE INDEX symbol_taps_by_time ON symbol_taps(timestamp);
CREATE INDEX symbol_taps_by_symbol ON symbol_taps(symbol_id, timestamp);

-- lansync: append-only phrase_completions
CREATE TABLE phrase_completions (
    id TEXT PRIMARY KEY,
    timestamp INTEGER NOT NULL,
    symbol_ids TEXT NOT NULL,            -- JSON array, in order
    construction_time_ms INTEGER NOT NULL,
    edits_made TEXT NOT NULL DEFAULT '[]',
    final_phrase_length INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    device_id TEXT NOT NULL,
    caregiver_profile_id TEXT
);

CREATE TABLE usage_sessions (
    id TEXT PRIMARY KEY,
    device_id TEXT NOT NULL DEFAULT '',
    location TEXT,                       -- "home iPad", "therapy iPad"
    caregiver_profile_id TEXT,
    start_time INTEGER NOT NULL DEFAULT 0,
    end_time INTEGER,
    total_symbols INTEGER NOT NULL DEFAULT 0,
    unique_symbols INTEGER NOT NULL DEFAULT 0,
    longest_phrase INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE caregiver_profiles (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT '',
    role TEXT,                           -- mom, dad, ABA therapist, OT
    is_active INTEGER NOT NULL DEFAULT 1
);

-- AuraLift, the training app (../shared/seeds/001_…): 12 Core Data entities merged property by
-- property (NSMergeByPropertyObjectTrumpMergePolicy), one-to-many and many-to-many
-- relationships, and counters (XP, LP, guild war wins and losses). UUIDs are TEXT keys, dates ms
-- since the epoch (INTEGER), Bools INTEGER 0/1, enums TEXT.

CREATE TABLE user_profiles (
    id TEXT PRIMARY KEY,
    username TEXT NOT NULL DEFAULT '',
    email TEXT,
    date_of_birth INTEGER,
    biological_sex TEXT,
    height_cm REAL,
    weight_kg REAL,
    body_fat_percentage REAL,
    current_rank_tier TEXT DEFAULT 'iron',
    current_lp INTEGER NOT NULL DEFAULT 0,
    total_xp INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL DEFAULT 0
);
-- XP and LP earned on the phone and the tablet while apart add up.
-- lansync: counter user_profiles.total_xp
-- lansync: counter user_profiles.current_lp

CREATE TABLE morpho_scans (
    id TEXT PRIMARY KEY,
    user_profile_id TEXT REFERENCES user_profiles(id) ON DELETE CASCADE,
    scan_date INTEGER NOT NULL DEFAULT 0,
    torso_length REAL, femur_length REAL, tibia_length REAL, humerus_length REAL, forearm_length REAL,
    shoulder_width REAL, hip_width REAL, arm_span REAL,
    femur_to_torso_ratio REAL, tibia_to_femur_ratio REAL, humerus_to_torso_ratio REAL,
    raw_pose_data BLOB
);

CREATE TABLE exercises (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT '',
    category TEXT,
    primary_muscle TEXT,
    secondary_muscles TEXT,
    equipment_type TEXT,
    default_tempo_concentric REAL DEFAULT 1.0,
    default_tempo_eccentric REAL DEFAULT 3.0,
    default_tempo_pause REAL DEFAULT 0.5,
    biomechanical_notes TEXT,
    stretch_position_bonus INTEGER DEFAULT 0,
    risk_level TEXT DEFAULT 'optimal',
    is_custom INTEGER DEFAULT 0
);

CREATE TABLE machine_specs (
    id TEXT PRIMARY KEY,
    exercise_id TEXT REFERENCES exercises(id) ON DELETE CASCADE,
    machine_name TEXT NOT NULL DEFAULT '',
    manufacturer TEXT,
    machine_type TEXT,
    cable_position_high INTEGER DEFAULT 0,
    cable_position_mid INTEGER DEFAULT 0,
    cable_position_low INTEGER DEFAULT 0,
    seat_adjustable INTEGER DEFAULT 0,
    pad_adjustable INTEGER DEFAULT 0,
    weight_stack_min REAL, weight_stack_max REAL, weight_increment REAL,
    cam_profile_notes TEXT,
    setup_instructions TEXT
);

CREATE TABLE workout_sessions (
    id TEXT PRIMARY KEY,
    user_profile_id TEXT REFERENCES user_profiles(id) ON DELETE CASCADE,
    start_time INTEGER NOT NULL DEFAULT 0,
    end_time INTEGER,
    total_volume REAL,
    total_xp_earned INTEGER DEFAULT 0,
    lp_change INTEGER DEFAULT 0,
    average_form_score REAL,
    combo_multiplier REAL DEFAULT 1.0,
    peak_velocity REAL,
    session_notes TEXT
);
CREATE INDEX workout_sessions_by_user ON workout_sessions(user_profile_id, start_time);

-- Ordered within a session by set_number (Core Data's ordered relationship).
CREATE TABLE workout_sets (
    id TEXT PRIMARY KEY,
    workout_session_id TEXT REFERENCES workout_sessions(id) ON DELETE CASCADE,
    exercise_id TEXT REFERENCES exercises(id),
    set_number INTEGER,
    reps INTEGER,
    weight_kg REAL,
    average_concentric_velocity REAL,
    peak_concentric_velocity REAL,
    velocity_loss_percent REAL,
    auto_stopped INTEGER DEFAULT 0,
    form_score REAL,
    bar_path_deviation REAL,
    rom_degrees REAL,
    tempo_actual_concentric REAL,
    tempo_actual_eccentric REAL,
    rpe REAL,
    xp_earned INTEGER DEFAULT 0,
    combo_tag TEXT,
    timestamp INTEGER
);
CREATE INDEX workout_sets_by_session ON workout_sets(workout_session_id, set_number);

-- lansync: append-only ranking_records
CREATE TABLE ranking_records (
    id TEXT PRIMARY KEY,
    user_profile_id TEXT REFERENCES user_profiles(id),
    record_date INTEGER NOT NULL,
    tier TEXT,
    lp_at_record INTEGER,
    strength_to_weight_ratio REAL,
    form_quality_average REAL,
    velocity_score REAL
);

CREATE TABLE muscle_groups (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT '',
    body_region TEXT,
    current_recovery_score REAL DEFAULT 100.0,
    weekly_volume_sets INTEGER DEFAULT 0,
    last_trained_date INTEGER
);

-- The many-to-many Exercise ↔ MuscleGroup relationship: one row per link, keyed by both ends.
CREATE TABLE exercise_muscle_groups (
    exercise_id TEXT NOT NULL REFERENCES exercises(id) ON DELETE CASCADE,
    muscle_group_id TEXT NOT NULL REFERENCES muscle_groups(id) ON DELETE CASCADE,
    PRIMARY KEY (exercise_id, muscle_group_id)
);

CREATE TABLE recovery_snapshots (
    id TEXT PRIMARY KEY,
    user_profile_id TEXT REFERENCES user_profiles(id) ON DELETE CASCADE,
    muscle_group_id TEXT REFERENCES muscle_groups(id),
    snapshot_date INTEGER NOT NULL DEFAULT 0,
    hrv_value REAL, sleep_hours REAL, sleep_quality_score REAL, resting_heart_rate REAL,
    active_energy_burned REAL, cycle_phase TEXT, overall_readiness REAL
);

CREATE TABLE nutrition_logs (
    id TEXT PRIMARY KEY,
    user_profile_id TEXT REFERENCES user_profiles(id) ON DELETE CASCADE,
    log_date INTEGER NOT NULL DEFAULT 0,
    target_calories REAL, actual_calories REAL, protein_grams REAL, carbs_grams REAL, fat_grams REAL,
    water_liters REAL, creatine_grams REAL, whey_protein_grams REAL
);

CREATE TABLE science_insights (
    id TEXT PRIMARY KEY,
    fetch_date INTEGER NOT NULL DEFAULT 0,
    topic TEXT, source TEXT, summary TEXT,
    recommended_tempo_change TEXT, recommended_rest_change TEXT, applied_to_exercises TEXT,
    is_active INTEGER DEFAULT 1
);

CREATE TABLE guild_memberships (
    id TEXT PRIMARY KEY,
    user_profile_id TEXT REFERENCES user_profiles(id) ON DELETE CASCADE,
    guild_name TEXT NOT NULL DEFAULT '',
    guild_tag TEXT,
    join_date INTEGER NOT NULL DEFAULT 0,
    role TEXT DEFAULT 'member' CHECK (role IN ('member', 'officer', 'leader')),
    guild_war_wins INTEGER NOT NULL DEFAULT 0,
    guild_war_losses INTEGER NOT NULL DEFAULT 0
);
-- lansync: counter guild_memberships.guild_war_wins
-- lansync: counter guild_memberships.guild_war_losses

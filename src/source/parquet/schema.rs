//! The schema's shape checked against what the record API reads, before any row is built.

use super::*;

/// Refuses a schema the record API would panic on (it asserts the shape of lists and maps,
/// and converts a leaf's physical and converted types by a fixed table): the first problem,
/// naming the field.
pub(super) fn check_schema(schema: &SchemaDescriptor) -> Result<(), String> {
    let mut stack: Vec<&Type> = schema
        .root_schema()
        .get_fields()
        .iter()
        .map(|f| &**f)
        .collect();
    while let Some(field) = stack.pop() {
        let name = field.name();
        let info = field.get_basic_info();
        if !info.has_repetition() {
            return Err(format!("field `{name}` has no repetition"));
        }
        if field.is_primitive() {
            check_leaf(field)?;
            continue;
        }
        let fields = field.get_fields();
        if fields.is_empty() {
            return Err(format!("group `{name}` has no fields"));
        }
        match info.converted_type() {
            ConvertedType::LIST => {
                let [repeated] = fields else {
                    return Err(format!(
                        "list `{name}` has {} fields, not one",
                        fields.len()
                    ));
                };
                if repeated.get_basic_info().repetition() != Repetition::REPEATED {
                    return Err(format!("list `{name}`: its field is not repeated"));
                }
            }
            ConvertedType::MAP | ConvertedType::MAP_KEY_VALUE => {
                let [entries] = fields else {
                    return Err(format!("map `{name}` has {} fields, not one", fields.len()));
                };
                let pairs = if entries.is_primitive() {
                    0
                } else {
                    entries.get_fields().len()
                };
                let repeated = entries.get_basic_info().has_repetition()
                    && entries.get_basic_info().repetition() == Repetition::REPEATED;
                let key_primitive = pairs > 0 && entries.get_fields()[0].is_primitive();
                if !repeated || !(1..=2).contains(&pairs) || !key_primitive {
                    return Err(format!(
                        "map `{name}` is not a repeated group of a primitive key and a value"
                    ));
                }
            }
            ConvertedType::NONE
            | ConvertedType::UTF8
            | ConvertedType::ENUM
            | ConvertedType::DECIMAL
            | ConvertedType::DATE
            | ConvertedType::TIME_MILLIS
            | ConvertedType::TIME_MICROS
            | ConvertedType::TIMESTAMP_MILLIS
            | ConvertedType::TIMESTAMP_MICROS
            | ConvertedType::UINT_8
            | ConvertedType::UINT_16
            | ConvertedType::UINT_32
            | ConvertedType::UINT_64
            | ConvertedType::INT_8
            | ConvertedType::INT_16
            | ConvertedType::INT_32
            | ConvertedType::INT_64
            | ConvertedType::JSON
            | ConvertedType::BSON
            | ConvertedType::INTERVAL => {}
        }
        stack.extend(fields.iter().map(|f| &**f));
    }
    Ok(())
}

/// A leaf whose physical and converted types the record API converts.
pub(super) fn check_leaf(field: &Type) -> Result<(), String> {
    let converted = field.get_basic_info().converted_type();
    let physical = field.get_physical_type();
    let supported = match physical {
        PhysicalType::BOOLEAN
        | PhysicalType::INT96
        | PhysicalType::FLOAT
        | PhysicalType::DOUBLE => true,
        PhysicalType::INT32 => matches!(
            converted,
            ConvertedType::NONE
                | ConvertedType::INT_8
                | ConvertedType::INT_16
                | ConvertedType::INT_32
                | ConvertedType::UINT_8
                | ConvertedType::UINT_16
                | ConvertedType::UINT_32
                | ConvertedType::DATE
                | ConvertedType::TIME_MILLIS
                | ConvertedType::DECIMAL
        ),
        PhysicalType::INT64 => matches!(
            converted,
            ConvertedType::NONE
                | ConvertedType::INT_64
                | ConvertedType::UINT_64
                | ConvertedType::TIME_MICROS
                | ConvertedType::TIMESTAMP_MILLIS
                | ConvertedType::TIMESTAMP_MICROS
                | ConvertedType::DECIMAL
        ),
        PhysicalType::BYTE_ARRAY => matches!(
            converted,
            ConvertedType::NONE
                | ConvertedType::UTF8
                | ConvertedType::ENUM
                | ConvertedType::JSON
                | ConvertedType::BSON
                | ConvertedType::DECIMAL
        ),
        PhysicalType::FIXED_LEN_BYTE_ARRAY => {
            matches!(converted, ConvertedType::NONE | ConvertedType::DECIMAL)
        }
    };
    if supported {
        Ok(())
    } else {
        Err(format!(
            "column `{}` is {physical} annotated {converted}, which the record reader does not convert",
            field.name()
        ))
    }
}

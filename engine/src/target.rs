pub struct Target;
